"""Is there a spy to detect? Read a SpyRL run's saved episodes and compare, per step,
the model's own detection with what a word-overlap detector finds in the same outputs.

    python scripts/spy_signal.py runs/spy [--json out.json]
    python scripts/spy_signal.py eval_games.jsonl      # python -m arena.eval --episodes

For every game it reports, per training step (mean over games, 95% bootstrap interval):

* ``parseable``: share of civilian votes that parse;
* ``model_acc``: among parseable civilian votes, the share naming the spy (chance 1/n);
* ``probe_acc``: the share of games in which the ``extractive`` bot's detector
  (arena/games/spy/bots.py: the player whose answer overlaps least with a civilian's copy),
  run on the SAME performing outputs, names the spy; a game where it abstains counts
  1/n, a uniform guess.

``probe_acc`` near chance says the outputs themselves carry little trace of the mask,
so no voter, trained or not, can beat chance on them; ``probe_acc`` above chance with
``model_acc`` at chance says the signal is there and the voters miss it. No model is
loaded: this reads ``<run>/episodes/step_*.jsonl.gz`` (``train.episodes.save``), one row
per step, or a JSONL file of games (``python -m arena.eval --episodes``), one row.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from arena.games.spy.bots import _suspect
from arena.games.spy.types import SpyObservation


def _view(prompt: str) -> str:
    """A civilian's copy of the source, from its performing prompt ("<Label>:\\n<view>\\n\\nTask: ...")."""
    body = prompt.split("\n", 1)[1] if "\n" in prompt else prompt
    return body.split("\n\nTask:", 1)[0]


def game_row(ep: dict) -> dict | None:
    """Model and probe detection for one finished game, or None when it has no civilian."""
    perform = [t for t in ep["turns"] if t["phase"] == "perform"]
    votes = [t for t in ep["turns"] if t["phase"] == "vote" and t["role"] == "civilian"]
    civilians = [t for t in perform if t["role"] == "civilian"]
    if not civilians or not perform:
        return None
    n = len(ep["roles"])
    spy = int(ep["info"]["spy"].rsplit("_", 1)[1])
    outputs = {int(t["seat"].rsplit("_", 1)[1]): t["action"] if isinstance(t["action"], str) else "" for t in perform}
    civ = civilians[0]
    obs = SpyObservation(
        phase="vote", role="civilian", seat_index=int(civ["seat"].rsplit("_", 1)[1]), n_players=n, task="math",  # the task only labels the prompt; _suspect ignores it
        view=_view(civ["messages"][-1]["content"]),
        outputs=tuple(outputs[p] for p in sorted(outputs)), output_players=tuple(sorted(outputs)),
    )
    suspect = _suspect(obs)
    parsed = [t for t in votes if t["valid"] and t["action"] not in (None, "N/A")]
    return {
        "n": n,
        "parseable": len(parsed) / max(1, len(votes)),
        "model_acc": (np.mean([int(t["action"]) == spy for t in parsed]) if parsed else None),
        "probe_acc": (1.0 / n if suspect is None else float(suspect == spy)),
    }


def interval(values: list[float], rng: np.random.Generator, reps: int = 2000) -> tuple[float, float, float]:
    a = np.asarray(values, dtype=float)
    boots = a[rng.integers(0, len(a), (reps, len(a)))].mean(axis=1)
    return float(a.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="a run folder or a JSONL file of games")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    files = [args.path] if args.path.is_file() else sorted((args.path / "episodes").glob("step_*.jsonl.gz"))
    if not files:
        raise SystemExit(f"spy_signal: no episodes under {args.path / 'episodes'} (train with train.episodes.save on)")
    rng = np.random.default_rng(0)
    report = []
    print(f"{'step':>5} {'games':>5} {'parseable':>20} {'model acc | parsed':>22} {'overlap probe acc':>22}  chance")
    for f in files:
        with (gzip.open(f, "rt") if f.suffix == ".gz" else f.open()) as lines:
            rows = [r for line in lines if line.strip() and (r := game_row(json.loads(line)))]
        step = int(f.name.split("_")[1].split(".")[0]) if f.name.startswith("step_") else 0
        accs = [r["model_acc"] for r in rows if r["model_acc"] is not None]
        cols = {
            "parseable": interval([r["parseable"] for r in rows], rng),
            "model_acc": interval(accs, rng) if accs else (float("nan"),) * 3,
            "probe_acc": interval([r["probe_acc"] for r in rows], rng),
        }
        report.append({"step": step, "games": len(rows), "chance": 1 / rows[0]["n"], **cols})
        fmt = "  ".join(f"{m:.2f} [{lo:.2f},{hi:.2f}]" for m, lo, hi in cols.values())
        print(f"{step:>5} {len(rows):>5}   {fmt}  {1 / rows[0]['n']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
