"""The weight-sync canary's gap (arena/loop/components/canary.py) on the built-in model, per generator backend and dtype,
against the learning rate and the number of updates, for a correct sync and for stale ones.

    .venv/bin/python bench/sync_canary.py                                  # hf and vLLM, float32 and bfloat16
    .venv/bin/python bench/sync_canary.py --backends hf --dtypes bfloat16 float16 --lrs 1e-6 2e-5 --updates 3

Play a few SpyRL games with the float32 hf generator (real prompts and completions); then for
each generator (backend, dtype) and each learning rate, a float32 learner takes ``--updates``
AdamW steps on the first ``--samples`` trainable completions (advantages +1/-1, as the trainer
picks the canary's turns), and after each step the mean |logprob| gap in nats/token between the
generator and the learner is measured on those completions at temperature 1:

- ``fresh``: before any update (the backend's numerics alone);
- ``stale1``: after the step, before its push (the generator one update behind);
- ``staleK``: after the last step, with the generator put back on the initial weights (all
  ``--updates`` behind);
- ``synced``: after the push (what a correct sync leaves; must pass).

Each gap is the canary's (the learner's weights rounded to the generator's dtype first,
``Learner.score(weights_dtype=...)``); "nearer before" is ``gap - gap_before``, the generator's gap to
the learner after the update minus its gap to the learner before it (logged by the trainer as
``sync/canary_gap`` and ``sync/canary_gap_before``; not a stop rule); "fp32 rule" is the gap to the unrounded learner, the canary before 2026-12-01.
``moved`` is the share of weights whose value in the generator's dtype changed since the start:
8.1% of the built-in model's weights lie exactly on bf16 ties, which the first update settles in
the gradient's direction, so a correct bf16 sync moves them by a whole bf16 step while the fp32
learner moved by ``lr``; the fp32 rule read that as stale.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def completions(samples: int, games: int) -> list:
    """The first trainable completions of a few SpyRL games played by the float32 hf generator."""
    from arena.loop.build import ModelStore, build_runner, make_model_policy
    from arena.loop.components.canary import canary_samples
    from arena.loop.config import load_config

    cfg = load_config(ROOT / "arena/games/spy/spy.yaml", [
        "policies.learner.dtype=float32", "runner.progress=false", "policies.learner.sampling.max_new_tokens=24",
        f"runner.num_envs={games}", "policies.learner.backend=hf",
    ])
    gen = make_model_policy(cfg.policies["learner"], "learner", ModelStore())
    episodes = build_runner(cfg, {"learner": gen}).play(list(range(games)))
    return canary_samples(episodes, "learner", samples)


def push(gen, state: dict) -> None:
    import torch

    if hasattr(gen, "load_weights"):
        gen.load_weights(state.items())
    else:
        with torch.no_grad():
            gen.model.load_state_dict(state)


def moved(initial: dict, state: dict, dtype: str) -> float:
    import torch

    target = getattr(torch, dtype)
    changed = total = 0
    for name, t in state.items():
        if t.is_floating_point():
            changed += int((t.to(target) != initial[name].to(target)).sum())
            total += t.numel()
    return changed / total


def measure(backend: str, dtype: str, lrs: list[float], updates: int, picked: list) -> list[dict]:
    from arena.core.models import load_causal_lm
    from arena.loop.build import ModelStore, make_model_policy
    from arena.loop.components.canary import generator_logprobs, mean_abs_gap
    from arena.loop.config import load_config
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    cfg = load_config(ROOT / "arena/games/spy/spy.yaml", [f"policies.learner.backend={backend}", f"policies.learner.dtype={dtype}"])
    spec = cfg.policies["learner"]
    gen = make_model_policy(spec, "learner", ModelStore())
    rows = []
    for lr in lrs:
        model, tok = load_causal_lm(spec.model, dtype="float32", device="cpu")
        learner = Learner(model, LearnerConfig(lr=lr, beta=0.0), tok.pad_token_id)
        initial = {k: v.detach().clone() for k, v in learner.module.state_dict().items()}
        push(gen, initial)

        def scores() -> tuple[list, list]:  # the learner rounded to the generator's dtype, and as it is
            return learner.score(picked, 1.0, dtype), learner.score(picked, 1.0)

        rounded, exact = scores()
        fresh = mean_abs_gap(generator_logprobs(gen, picked), rounded)
        batch = [s.model_copy(update={"advantage": 1.0 if i % 2 else -1.0}) for i, s in enumerate(picked)]
        for k in range(1, updates + 1):
            old = rounded
            learner.step(batch)
            rounded, exact = scores()
            stale = generator_logprobs(gen, picked)  # one update behind
            state = {n: v.detach().clone() for n, v in learner.module.state_dict().items()}
            push(gen, state)
            start = time.perf_counter()
            synced = generator_logprobs(gen, picked)
            row = {
                "backend": backend, "dtype": dtype, "lr": lr, "update": k, "moved": moved(initial, state, dtype),
                "fresh": fresh, "update_size": mean_abs_gap(rounded, old),
                "synced": mean_abs_gap(synced, rounded), "synced_before": mean_abs_gap(synced, old),
                "stale1": mean_abs_gap(stale, rounded), "stale1_before": mean_abs_gap(stale, old),
                "synced_fp32": mean_abs_gap(synced, exact), "stale1_fp32": mean_abs_gap(stale, exact),
                "canary_s": time.perf_counter() - start,
            }
            if k == updates:
                push(gen, initial)
                row[f"stale{updates}"] = mean_abs_gap(generator_logprobs(gen, picked), rounded)
                push(gen, state)
            rows.append(row)
            print(row, flush=True)
    return rows


def table(rows: list[dict], updates: int) -> str:
    head = ("| generator | dtype | lr | update | weights moved | fresh | update size | synced: gap, nearer before | "
            f"stale1: gap, nearer before | stale{updates} | fp32 rule: synced, stale1 |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        last = r.get(f"stale{updates}")
        out.append(
            f"| {r['backend']} | {r['dtype']} | {r['lr']:g} | {r['update']} | {100 * r['moved']:.3g}% | "
            f"{r['fresh']:.3g} | {r['update_size']:.3g} | {r['synced']:.3g}, {r['synced'] - r['synced_before']:+.3g} | "
            f"{r['stale1']:.3g}, {r['stale1'] - r['stale1_before']:+.3g} | {'' if last is None else f'{last:.3g}'} | "
            f"{r['synced_fp32']:.3g}, {r['stale1_fp32']:.3g} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", nargs="+", default=["hf", "vllm"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-6, 2e-5],
                   help="learning rates (1e-6: the learner's default; 2e-5: spy.yaml's)")
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--games", type=int, default=2)
    args = p.parse_args()
    picked = completions(args.samples, args.games)
    rows = []
    for backend in args.backends:
        for dtype in args.dtypes:
            rows += measure(backend, dtype, args.lrs, args.updates, picked)
    print(table(rows, args.updates))


if __name__ == "__main__":
    main()
