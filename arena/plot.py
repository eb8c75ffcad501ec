"""``python -m arena.plot RUN_DIR``: draw a run's curves to ``RUN_DIR/curves.png``.

Panels: the game's own (``LLMGame.plot_panels``, e.g. SpyRL's reward per role
and detection), then KL to the reference and the generator/learner logprob gap.
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


def panels_for(run_dir: Path, rows: list[dict]) -> list[tuple[str, tuple[str, ...]]]:
    """The run's game panels (from config.json), else one of its rewards per role, then the framework's."""
    game_panels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    config = run_dir / "config.json"
    if config.is_file():
        from arena.registry import UnknownName, game_class

        try:
            game_panels = game_class(json.loads(config.read_text())["game"]["name"]).plot_panels
        except (UnknownName, KeyError, ValueError):
            game_panels = ()
    if not game_panels:
        rewards = tuple(sorted({k for r in rows for k in r if k.startswith("reward/")}))
        game_panels = (("reward per role", rewards),)
    return [*game_panels, *FRAMEWORK_PANELS]


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
                ax.plot(xs, ys, marker="o", markersize=3, label=key.split("/")[-1])
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


if __name__ == "__main__":
    raise SystemExit(main())
