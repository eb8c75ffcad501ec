"""The weight-sync canary's gap (arena/loop/canary.py) on the built-in model, per generator backend and dtype.

    .venv/bin/python bench/sync_canary.py                       # hf float32 and bfloat16, vLLM float32 and bfloat16
    .venv/bin/python bench/sync_canary.py --backends hf --lr 2e-5

Play a few SpyRL games with the float32 hf generator (real prompts and completions);
then for each generator, on the first ``--samples`` trainable completions (as the
trainer picks them), report the mean |logprob| gap between the generator and a float32 learner copy of
the same weights

- ``fresh``: before any update (the backend's numerics alone);
- ``stale``: after ONE learner update at ``--lr`` that was NOT synced (what the canary must catch);
- ``synced``: after that update was pushed to the generator (must pass).

The defaults of ``train.sync_canary_max_gap: auto`` come from these figures
(bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def completions(samples: int, games: int) -> list:
    """The first trainable completions of a few SpyRL games played by the float32 hf generator."""
    from arena.loop.build import ModelStore, build_runner, make_model_policy
    from arena.loop.canary import canary_samples
    from arena.loop.config import load_config

    cfg = load_config(ROOT / "games/spy/spy.yaml", [
        "policies.learner.dtype=float32", "runner.progress=false", "policies.learner.sampling.max_new_tokens=24",
        f"runner.num_envs={games}",
    ])
    gen = make_model_policy(cfg.policies["learner"], "learner", ModelStore())
    episodes = build_runner(cfg, {"learner": gen}).play(list(range(games)))
    return canary_samples(episodes, "learner", samples)


def measure(backend: str, dtype: str, lr: float, picked: list) -> dict[str, float]:
    import torch

    from arena.core.models import load_causal_lm
    from arena.loop.build import ModelStore, make_model_policy
    from arena.loop.canary import sync_gap
    from arena.loop.config import load_config
    from learners.config import LearnerConfig
    from learners.update import Learner

    cfg = load_config(ROOT / "games/spy/spy.yaml", [f"policies.learner.backend={backend}", f"policies.learner.dtype={dtype}"])
    spec = cfg.policies["learner"]
    gen = make_model_policy(spec, "learner", ModelStore())
    model, tok = load_causal_lm(spec.model, dtype="float32", device="cpu")
    learner = Learner(model, LearnerConfig(lr=lr, beta=0.0), tok.pad_token_id)
    out = {"fresh": sync_gap(gen, learner, picked)}
    learner.step([s.model_copy(update={"advantage": 1.0 if i % 2 else -1.0}) for i, s in enumerate(picked)])
    out["stale"] = sync_gap(gen, learner, picked)
    state = {k: v.detach().clone() for k, v in learner.module.state_dict().items()}
    if hasattr(gen, "load_weights"):
        gen.load_weights(state.items())
    else:
        with torch.no_grad():
            gen.model.load_state_dict(state)
    start = time.perf_counter()
    out["synced"] = sync_gap(gen, learner, picked)
    out["canary_s"] = time.perf_counter() - start
    out["tokens"] = float(sum(len(s.completion_ids) for s in picked))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", nargs="+", default=["hf", "vllm"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--lr", type=float, default=2e-5, help="one update at this rate (spy.yaml's)")
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--games", type=int, default=2)
    args = p.parse_args()
    print("| generator | dtype | fresh | stale (1 unsynced step) | synced | canary time |")
    print("|---|---|---|---|---|---|")
    picked = completions(args.samples, args.games)
    for backend in args.backends:
        for dtype in args.dtypes:
            r = measure(backend, dtype, args.lr, picked)
            print(f"| {backend} | {dtype} | {r['fresh']:.2e} | {r['stale']:.2e} | {r['synced']:.2e} | "
                  f"{r['canary_s']:.2f} s ({int(r['tokens'])} tokens) |", flush=True)


if __name__ == "__main__":
    main()
