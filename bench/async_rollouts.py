"""Async rollouts (``train.async``) against the synchronous loop: wall time and the importance ratios,
on the built-in model, one ``arena.train`` process per arm, run one after the other.

    .venv/bin/python bench/async_rollouts.py                       # SpyRL, vLLM generator, sync / k=1 / k=2
    .venv/bin/python bench/async_rollouts.py --backend hf --steps 4 --games 4

Each arm trains the same config for ``--steps`` steps from the same seed (the first step is
played by the initial weights in every arm, so only steps 2.. can overlap). Reported per arm:
the wall time of the run (start-up included), the mean step time after step 1, the mean time
the trainer waited for games (``time/rollout_s``: with async, the part of playing not hidden
behind the update), the thread's own playing time (``time/play_s``), the staleness, and the
per-token ratio learner/generator (``is/ratio_mean``, ``is/ratio_max``, ``is/over_cap_frac``
at ``learner.importance.cap``, 2 by default) with the TIS correction on in the async arms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_arm(config: str, sets: list[str], run: Path) -> tuple[float, list[dict]]:
    argv = [sys.executable, "-m", "arena.train", config, "--run-dir", str(run)]
    for item in sets:
        argv += ["--set", item]
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"arm failed ({' '.join(sets[-2:])}):\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return wall, [r for r in rows if r.get("step", 0) >= 1]


def mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.fmean(values) if values else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="games/spy/spy.yaml")
    p.add_argument("--backend", default="vllm", choices=["vllm", "hf"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--games", type=int, default=4)
    p.add_argument("--ks", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()
    common = [f"policies.learner.backend={args.backend}", f"train.steps={args.steps}",
              f"train.games_per_step={args.games}", f"train.checkpoint_every={args.steps}", "train.plot=false",
              "train.episodes.save=false", "train.loggers=[]", "runner.progress=false"]
    arms = [("sync", common)] + [(f"async k={k}", [*common, f"train.async.max_staleness={k}", "learner.importance.mode=tis"])
                                 for k in args.ks]
    print(f"{args.config}, {args.backend} generator, {args.steps} steps x {args.games} games\n")
    print("| arm | wall s | step s (2..) | waited for games s | play s | staleness | is/ratio_mean | is/ratio_max | over cap |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, sets in arms:
            wall, rows = run_arm(args.config, sets, Path(tmp) / name.replace(" ", "_").replace("=", ""))
            later = rows[1:]
            print(f"| {name} | {wall:.0f} | {mean(later, 'time/step_s'):.1f} | {mean(later, 'time/rollout_s'):.1f} "
                  f"| {mean(rows, 'time/play_s'):.1f} | {mean(later, 'async/staleness'):.2f} | "
                  f"{mean(rows, 'is/ratio_mean'):.4f} | {max((r.get('is/ratio_max', 0) for r in rows), default=0):.3g} | "
                  f"{mean(rows, 'is/over_cap_frac'):.4f} |", flush=True)


if __name__ == "__main__":
    main()
