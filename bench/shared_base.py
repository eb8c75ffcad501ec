"""Two trainable LoRA policies (Kuhn p0 and p1) as adapters on ONE base against two model copies (CPU).

Each mode runs in its own process (peak RSS is a per-process high-water mark): build the trainer of
``games/openspiel/kuhn.players.yaml`` on the built-in SmolLM2-135M in float32 with ``learner.lora``
(``shared_base: auto``, one base, or ``false``, a copy per policy), then train ``--steps`` Kuhn steps
(the same games and seeds in both modes, so the same samples). Reported: the bytes of every distinct
parameter the two learners and the two generators hold (a tensor held twice counts once; the KL
reference, off at ``beta: 0``, is not held), the peak RSS, the build time and the mean step time.

    OMP_NUM_THREADS=2 python bench/shared_base.py      # both modes; prints a markdown table
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one_mode(shared: bool, steps: int, games: int) -> dict[str, float]:
    import torch

    from arena.loop.config import load_config
    from arena.loop.trainer import Trainer, seed_everything

    overrides = ["runner.progress=false", "train.evals=[]", "train.plot=false", f"train.steps={steps}",
                 f"train.games_per_step={games}", f"runner.num_envs={games}", f"train.checkpoint_every={steps + 1}",
                 "learner.lora={r: 8, alpha: 16.0, shared_base: " + ("auto" if shared else "false") + "}"]
    cfg = load_config("games/openspiel/kuhn.players.yaml", overrides)
    seed_everything(cfg.train.seed)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as run:
        trainer = Trainer(cfg, Path(run))
        build_s = time.perf_counter() - t0
        held: dict[int, int] = {}
        for unit in trainer.trained:
            for module in (unit.learner.module, unit.generator.model):
                held |= {p.data_ptr(): p.numel() * p.element_size() for p in module.parameters()}
        t1 = time.perf_counter()
        rows = [trainer.train_step() for _ in range(steps)]
        step_s = (time.perf_counter() - t1) / steps
    return {
        "held_mib": sum(held.values()) / 2**20, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "build_s": build_s, "step_s": step_s, "update_s": sum(r["time/update_s"] for r in rows) / steps,
        "rollout_s": sum(r["time/rollout_s"] for r in rows) / steps, "threads": torch.get_num_threads(),
        "samples": sum(r.get("p0/samples", 0.0) + r.get("p1/samples", 0.0) for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--mode", choices=["shared", "copies"], help="one mode in this process (internal)")
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(one_mode(args.mode == "shared", args.steps, args.games)))
        return
    results = {}
    for mode in ("shared", "copies"):
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--steps", str(args.steps),
                              "--games", str(args.games)], capture_output=True, text=True, check=True, cwd=ROOT,
                             env=os.environ | {"PYTHONWARNINGS": "ignore"})
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"threads {results['shared']['threads']}; {args.steps} step(s) of {args.games} games\n")
    print("| p0 + p1 | parameters held | peak RSS | build | step | rollout | update | samples |")
    print("|---|---|---|---|---|---|---|---|")
    for mode, r in results.items():
        print(f"| {mode} | {r['held_mib']:.0f} MiB | {r['peak_rss_mib']:.0f} MiB | {r['build_s']:.1f} s | "
              f"{r['step_s']:.1f} s | {r['rollout_s']:.1f} s | {r['update_s']:.1f} s | {r['samples']:.0f} |")


if __name__ == "__main__":
    main()
