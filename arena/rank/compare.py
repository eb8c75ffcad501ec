"""Evaluation statistics beyond per-game means: pooled ratios against chance, paired comparisons.

Pooled ratios
    A game may declare ``eval_ratios``: name -> (numerator, denominator,
    chance). Numerator and denominator are sums and differences of its episode
    metrics (``"parseable_vote_rate - na_rate"``), chance is a number or
    ``1/<config field>``. The ratio is pooled over games,
    ``sum_g num_g / sum_g den_g`` (games with more of the denominator weigh
    more; a game without any adds nothing), with a 95% percentile bootstrap
    over games. SpyRL declares the detection accuracy among votes that name a
    player, against the chance 1/n of a uniform guess.

Paired comparison (``python -m arena.eval --compare-set KEY=VALUE``)
    Arm A is the config with ``--set``; arm B the same plus ``--compare-set``.
    Both play the SAME held-out seeds, so the game (source, spy, draws) is the
    same in each pair and only the policy differs. Per metric, the difference
    of means ``A - B`` gets a 95% percentile bootstrap interval from resampling
    the game indices jointly (the pairs stay together), which is much tighter
    than two independent intervals when games vary a lot. Ratios are
    compared the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from arena.core.types import Episode

RESAMPLES = 2000


def terms(expr: str) -> list[tuple[float, str]]:
    """``"a - b + c"`` -> [(1, a), (-1, b), (1, c)]."""
    tokens = re.findall(r"([+-]?)\s*([A-Za-z_][\w/]*)", expr.replace(" ", ""))
    if not tokens:
        raise ValueError(f"no metric names in {expr!r}")
    return [(-1.0 if sign == "-" else 1.0, name) for sign, name in tokens]


def evaluate(expr: str, metrics: Mapping[str, float]) -> float | None:
    """The expression over one game's metrics; None when the game lacks one of them."""
    parts = terms(expr)
    if any(name not in metrics for _, name in parts):
        return None
    return float(sum(sign * metrics[name] for sign, name in parts))


def chance_value(text: str | float | None, config: Any) -> float | None:
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    num, sep, field = str(text).partition("/")
    if not sep:
        return float(num)
    value = getattr(config, field.strip(), None)
    return float(num) / float(value) if value else None


def ratio_arrays(episodes: Sequence[Episode], num: str, den: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(evaluate(num, ep.metrics), evaluate(den, ep.metrics)) for ep in episodes]
    return (np.array([n if n is not None and d is not None else 0.0 for n, d in pairs]),
            np.array([d if n is not None and d is not None else 0.0 for n, d in pairs]))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Pooled ratio along the last axis (NaN where the denominator sums to 0)."""
    total = den.sum(axis=-1)
    return np.where(total > 0, num.sum(axis=-1) / np.where(total > 0, total, 1.0), np.nan)


def _indices(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(RESAMPLES, n))


def _interval(point: float, boots: np.ndarray) -> dict[str, float]:
    boots = boots[~np.isnan(boots)]
    low, high = (np.percentile(boots, [2.5, 97.5]) if len(boots) else (np.nan, np.nan))
    return {"mean": float(point), "low": float(low), "high": float(high)}


def ratio_summary(game_cls: Any, config: Any, episodes: Sequence[Episode], seed: int = 0) -> dict[str, dict[str, float]]:
    """The game's declared ratios: name -> {mean, low, high, n (summed denominator), chance}."""
    out = {}
    idx = _indices(len(episodes), seed)
    for name, (num, den, chance) in getattr(game_cls, "eval_ratios", {}).items():
        n, d = ratio_arrays(episodes, num, den)
        row = _interval(_ratio(n, d), _ratio(n[idx], d[idx]))
        row |= {"n": float(d.sum()), "chance": chance_value(chance, config)}  # type: ignore[dict-item]
        out[f"ratio/{name}"] = row
    return out


def paired_summary(a: Sequence[Episode], b: Sequence[Episode], game_cls: Any = None, seed: int = 0,
                   rows_a: Sequence[Mapping[str, float]] | None = None,
                   rows_b: Sequence[Mapping[str, float]] | None = None) -> dict[str, dict[str, float]]:
    """metric -> {a, b, diff, low, high, n}: A - B on the same games, paired bootstrap interval."""
    from arena.stats.heldout import per_episode

    if len(a) != len(b) or any(x.seed != y.seed for x, y in zip(a, b, strict=True)):
        raise ValueError("a paired comparison needs the same games (seeds) in both arms")
    rows_a = rows_a or [per_episode(ep) for ep in a]
    rows_b = rows_b or [per_episode(ep) for ep in b]
    out: dict[str, dict[str, float]] = {}
    keys = sorted({k for r in rows_a for k in r} & {k for r in rows_b for k in r})
    for key in keys:
        both = [(x[key], y[key]) for x, y in zip(rows_a, rows_b, strict=True) if key in x and key in y]
        if len(both) < 2:
            continue
        va, vb = np.array(both).T
        diff = va - vb
        boots = diff[_indices(len(diff), seed)].mean(axis=1)
        out[key] = {"a": float(va.mean()), "b": float(vb.mean()), **_rename(_interval(diff.mean(), boots)),
                    "n": float(len(diff))}
    idx = _indices(len(a), seed)
    for name, (num, den, _) in (getattr(game_cls, "eval_ratios", {}) or {}).items():
        na, da = ratio_arrays(a, num, den)
        nb, db = ratio_arrays(b, num, den)
        point = _ratio(na, da) - _ratio(nb, db)
        boots = _ratio(na[idx], da[idx]) - _ratio(nb[idx], db[idx])
        out[f"ratio/{name}"] = {"a": float(_ratio(na, da)), "b": float(_ratio(nb, db)), **_rename(_interval(point, boots)),
                                "n": float(len(a))}
    return out


def _rename(interval: dict[str, float]) -> dict[str, float]:
    return {"diff": interval["mean"], "low": interval["low"], "high": interval["high"]}


def play_held_out(cfg: Any, seeds: Sequence[int]) -> list[Episode]:
    """The config's seats on the given seeds, through the batched runner."""
    from arena.loop.build import build_policies, build_runner

    policies = build_policies(cfg, names=dict.fromkeys(cfg.seat_table().values()), played_only=True)
    return build_runner(cfg, policies, state=cfg.game.make_env().make_state()).play(seeds)


def print_ratios(ratios: Mapping[str, Mapping[str, Any]]) -> None:
    for key, s in ratios.items():
        chance = f"   chance {s['chance']:.4f}" if s.get("chance") is not None else ""
        print(f"{key:<32} {s['mean']:>9.4f}   [{s['low']:>8.4f}, {s['high']:>8.4f}]  over {s['n']:.1f}{chance}")


def print_paired(rows: Mapping[str, Mapping[str, float]], label_a: str, label_b: str) -> None:
    print(f"paired comparison on the same games: A = {label_a}, B = {label_b}")
    print(f"{'metric':<32} {'A':>8} {'B':>8} {'A - B':>8} {'95% interval':>22}")
    for key, s in rows.items():
        print(f"{key:<32} {s['a']:>8.4f} {s['b']:>8.4f} {s['diff']:>+8.4f}   [{s['low']:>+8.4f}, {s['high']:>+8.4f}]")
