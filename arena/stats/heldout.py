"""Held-out seeds and bootstrap intervals: the numbers evaluation reports about a set of games.

Held-out games use seeds ``2**40 + seed * 1_000_003 + i``, a range training never
reaches (its seeds are ``train.seed * 1_000_003 + step * games + i``). Each metric
is a mean over games with a 95% percentile-bootstrap interval (seeded resampling).
Used by evaluation inside training (arena/loop/components/evals.py), the league and the
ranking tools (arena/rank/).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from arena.core.types import Episode

HELD_OUT_BASE = 2**40


def held_out_seeds(seed: int, games: int) -> list[int]:
    return [HELD_OUT_BASE + seed * 1_000_003 + i for i in range(games)]


def per_episode(ep: Episode) -> dict[str, float]:
    """The numbers one game contributes (each is averaged over games)."""
    row = {f"game/{k}": float(v) for k, v in ep.metrics.items()}
    by_role: dict[str, list[float]] = defaultdict(list)
    score: dict[str, list[float]] = defaultdict(list)
    for seat, total in ep.rewards.items():
        by_role[ep.roles[seat]].append(total)
        if seat in ep.outcome:
            score[ep.roles[seat]].append(ep.outcome[seat].score)
    row |= {f"reward/{r}": float(np.mean(v)) for r, v in by_role.items()}
    row |= {f"outcome/{r}": float(np.mean(v)) for r, v in score.items()}
    row["game/invalid_turn_rate"] = sum(not t.valid for t in ep.turns) / max(1, len(ep.turns))
    row["game/truncated_rate"] = float(ep.truncated)
    return row


def bootstrap(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the 95% percentile-bootstrap interval of the mean."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(data.mean()), float(low), float(high)


def bootstrap_difference(a: Sequence[float], b: Sequence[float], paired: bool = True, resamples: int = 10000,
                         seed: int = 0) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high): a 95% percentile-bootstrap interval of the difference of means.

    ``paired``: ``a[i]`` and ``b[i]`` share a unit (a training seed run under two methods), so the
    per-unit differences ``a[i] - b[i]`` are resampled together. Otherwise each sample is resampled on
    its own: ``mean(a*) - mean(b*)`` with ``a*`` drawn from ``a`` and ``b*`` from ``b``.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if paired:
        if x.shape != y.shape:
            raise ValueError(f"paired samples differ in size: {len(x)} and {len(y)}")
        return bootstrap(x - y, resamples=resamples, seed=seed)
    rng = np.random.default_rng(seed)
    dx = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    dy = y[rng.integers(0, len(y), size=(resamples, len(y)))].mean(axis=1)
    low, high = np.percentile(dx - dy, [2.5, 97.5])
    return float(x.mean() - y.mean()), float(low), float(high)


def summarise(episodes: Sequence[Episode], seed: int = 0) -> dict[str, dict[str, float]]:
    """metric -> {mean, low, high, n} over the games that report it."""
    rows = [per_episode(ep) for ep in episodes]
    keys = sorted({k for r in rows for k in r})
    out = {}
    for key in keys:
        values = [r[key] for r in rows if key in r]
        mean, low, high = bootstrap(values, seed=seed)
        out[key] = {"mean": mean, "low": low, "high": high, "n": float(len(values))}
    return out
