"""``python -m arena.plot RUN_DIR``: draw a run's curves to ``RUN_DIR/curves.png``.

Panels: the game's own (``LLMGame.plot_panels``, e.g. SpyRL's reward per role
and detection), then KL to the reference and the generator/learner logprob gap,
then one per evaluation inside training (``train.evals``) with its intervals shaded.
The game is read from the run's ``config.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FRAMEWORK_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("KL to reference", ("kl",)),
    ("logprob gap (generator vs learner)", ("logprob_gap",)),
)

#: Drawn when the run has a league (arena/loop/components/league.py): the current policy's rating against its past.
LEAGUE_PANEL = ("league rating vs base (95% interval)", ("league/rating", "league/rating_low", "league/rating_high"))


def panels_for(run_dir: Path, rows: list[dict]) -> list[tuple[str, tuple[str, ...]]]:
    """The run's game panels (from config.json), else one of its rewards per role, then the framework's."""
    game_panels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    config = run_dir / "config.json"
    if config.is_file():
        from arena.core.registry import UnknownName, game_class

        try:
            game_panels = game_class(json.loads(config.read_text())["game"]["name"]).plot_panels
        except (UnknownName, KeyError, ValueError):
            game_panels = ()
    if not game_panels:
        rewards = tuple(sorted({k for r in rows for k in r if k.startswith("reward/")}))
        game_panels = (("reward per role", rewards),)
    league = [LEAGUE_PANEL] if any(r.get("league/rating") is not None for r in rows) else []
    return [*game_panels, *FRAMEWORK_PANELS, *league, *eval_panels(rows)]


def eval_panels(rows: list[dict]) -> list[tuple[str, tuple[str, ...]]]:
    """One panel per evaluation inside training (arena/loop/components/evals.py): its metrics' means over steps;
    ``plot_run`` shades each one's ``_lo``..``_hi`` interval."""
    keys = sorted({k for r in rows for k in r if k.startswith("eval/") and not k.endswith(("_lo", "_hi"))})
    names = dict.fromkeys(k.split("/")[1] for k in keys)
    return [(f"eval {name} (held-out seeds; 95% interval; step 0 = untrained)",
             tuple(k for k in keys if k.split("/")[1] == name)) for name in names]


def read_metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a training run folder?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_run(run_dir: Path, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    panels = panels_for(run_dir, rows)
    ncols = 2
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(11, 3.5 * nrows), constrained_layout=True, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, keys) in zip(axes.flat, panels):
        for key in keys:
            points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                label = key.split("/", 2)[-1] if key.startswith("eval/") else key.split("/")[-1]
                line, = ax.plot(xs, ys, marker="o", markersize=3, label=label)
                band = [(r["step"], r[f"{key}_lo"], r[f"{key}_hi"]) for r in rows
                        if r.get(key) is not None and r.get(f"{key}_lo") is not None and r.get(f"{key}_hi") is not None]
                if band:
                    bx, lo, hi = zip(*band, strict=True)
                    ax.fill_between(bx, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"{run_dir}")
    out = out or run_dir / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_payoff(players: list[str], matrices: dict[str, list[list[float | None]]], out: Path, title: str = "") -> Path:
    """A tournament's payoff matrices (``overall`` first, then one per role) as heatmaps in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(matrices)
    size = 1.0 + 0.55 * len(players)
    fig, axes = plt.subplots(1, len(names), figsize=(size * len(names) + 1.5, size + 0.8), squeeze=False,
                             constrained_layout=True)
    for ax, name in zip(axes.flat, names):
        m = np.array([[np.nan if v is None else v for v in row] for row in matrices[name]], dtype=float)
        im = ax.imshow(m, vmin=0.0, vmax=1.0, cmap="RdBu")
        for i in range(len(players)):
            for j in range(len(players)):
                if not np.isnan(m[i, j]):
                    ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(players)), players, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(players)), players, fontsize=8)
        ax.set_title(name if name == "overall" else f"row as {name}", fontsize=9)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="row's mean result vs column")
    fig.suptitle(title or "payoff matrix")
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m arena.plot", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        print(plot_run(args.run_dir, args.out))
    except FileNotFoundError as e:
        print(f"error: {e}")
        return 2
    return 0

