"""``python -m arena.plot RUN_DIR``: draw a run's curves to ``RUN_DIR/curves.png``.

Panels: reward per role, detection accuracy / N/A rate / parseable votes, KL to
the reference, and the generator/learner logprob gap.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PANELS: list[tuple[str, tuple[str, ...]]] = [
    ("reward per role", ("reward/spy", "reward/civilian", "reward/detector")),
    ("detection", ("game/detection_accuracy", "game/na_rate", "game/parseable_vote_rate", "game/spy_caught")),
    ("KL to reference", ("kl",)),
    ("logprob gap (generator vs learner)", ("logprob_gap",)),
]


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
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    for ax, (title, keys) in zip(axes.flat, PANELS, strict=True):
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
