"""The learner's update with and without the rows whose gradient is 0 (``learner.skip_inert_rows``), on one batch.

A config's first step builds its batch once (``train.descent``: every information state's rows, advantages
against the exact best response; otherwise a played step, through the trainer), then the SAME batch is trained
from the SAME weights twice, each on a fresh copy of the learner: the peer (``skip_inert_rows: false``, every
row run) and arena's default (inert rows left out). Reported: rows, rows left out, micro-batches, the update's
wall time, and the largest difference between the two updated models' weights (the same update: float32
rounding only). Threads as the process has them (``OMP_NUM_THREADS``).

    OMP_NUM_THREADS=1 .venv/bin/python bench/inert_rows.py games/openspiel/leduc.ed.yaml
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    from arena.loop.build import build_trainer
    from arena.loop.config import load_config

    cfg = load_config(args.config, overrides=[*args.overrides, "train.plot=false", "train.loggers=[]", "train.evals=[]"])
    with tempfile.TemporaryDirectory() as tmp:
        built = build_trainer(cfg, Path(tmp))
        descent = built.components.get("descent")
        if descent is None:
            raise SystemExit("bench/inert_rows.py: the config has no train.descent; give a descent config")
        t0 = time.perf_counter()
        samples, stats = descent.samples_of_tree(1)
        print(f"batch: {len(samples)} rows from {int(stats['descent/states'])} states in {time.perf_counter() - t0:.0f} s; "
              f"exploitability {stats['descent/exploitability']:.4f}; {sum(s.advantage == 0 for s in samples)} rows "
              f"of advantage 0; torch threads {torch.get_num_threads()}")
        learner = built.trained[0].learner
        start = copy.deepcopy(learner.module.state_dict())
        before = torch.cat([p.detach().flatten().float() for p in learner.module.parameters()])
        weights = {}
        print("| arm | rows run | micro-batches | update s |")
        print("|---|---|---|---|")
        for arm, skip in (("every row (peer)", False), ("inert rows left out (arena)", True)):
            learner.module.load_state_dict(start)
            fresh = type(learner)(learner.module, learner.cfg.model_copy(update={"skip_inert_rows": skip}),
                                  learner.pad_id, learner.temperature)
            t0 = time.perf_counter()
            out = fresh.step(samples)
            wall = time.perf_counter() - t0
            run = len(samples) - int(out.get("rows_skipped", 0))
            print(f"| {arm} | {run} | {int(out['micro_batches'])} | {wall:.1f} |", flush=True)
            weights[arm] = torch.cat([p.detach().flatten().float() for p in learner.module.parameters()])
        a, b = weights.values()
        print(f"largest weight difference between the two updates: {float((a - b).abs().max()):.3g} "
              f"(largest weight change of the update: {float((a - before).abs().max()):.3g})")


if __name__ == "__main__":
    main()
