"""The exact evaluation's scorer with the prompts' common prefix run once against the plain batched scorer.

    OMP_NUM_THREADS=1 .venv/bin/python bench/exact_scoring.py                       # Kuhn (12 states), Leduc (first 192)
    OMP_NUM_THREADS=1 .venv/bin/python bench/exact_scoring.py --games leduc_poker --states 0   # all 936 states

Every information state's query (its seat's prompt and legal action names, arena/games/openspiel/exact.py
``info_state_queries``) is scored as ``arena.loop.exact.batch_reply_logprobs`` scores it for an exact
evaluation, descent or the best-response bot: ``HFPolicy.score_rows``, SCORE_BATCH queries a batch. The
two arms run on one loaded model (SmolLM2-135M, float32), alternated, in one process: ``shared`` (the
default, ``prefix_sharing``: each batch's common prefix, the rules, prefilled once, arena/policies/hf_prefix.py
``prefill``) and ``plain`` (each distinct prompt prefilled whole). Prints wall time, the prompt positions
prefilled and the largest difference between the arms' log-likelihoods.
"""

from __future__ import annotations

import argparse
import time

import torch

from arena.games.openspiel.exact import info_state_queries
from arena.games.openspiel.types import OpenSpielConfig
from arena.loop.exact import batch_reply_logprobs
from arena.policies.base import Request, SamplingParams
from arena.policies.hf import HFPolicy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", nargs="+", default=["kuhn_poker", "leduc_poker"])
    p.add_argument("--states", type=int, default=192, help="score the first N information states (0: all)")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    policy = HFPolicy(dtype="float32", name="learner")
    params = SamplingParams(temperature=1.0)
    print(f"threads {torch.get_num_threads()}")
    print("| game | states | scores | arm | prompt positions prefilled | wall (repeats) | max |l shared - l plain| |")
    print("|---|---|---|---|---|---|---|")
    for game in args.games:
        _, queries, _ = info_state_queries(OpenSpielConfig(game=game))
        queries = queries[:args.states] if args.states else queries
        prompts = [policy.encode(Request(messages=q.messages, params=params, seat=q.seat)) for q in queries]
        total = sum(len(x) for x in prompts)
        scores = sum(len(q.actions) for q in queries)
        out: dict[str, list[list[float]]] = {}
        walls: dict[str, list[float]] = {"shared": [], "plain": []}
        shared_tokens = 0
        for _ in range(args.repeats):
            for arm in ("shared", "plain"):
                policy.prefix_sharing = arm == "shared"
                before = policy.prefill_tokens_shared
                t0 = time.perf_counter()
                out[arm] = batch_reply_logprobs(policy, queries, params)
                walls[arm].append(time.perf_counter() - t0)
                shared_tokens = policy.prefill_tokens_shared - before if arm == "shared" else shared_tokens
        gap = max(abs(a - b) for ra, rb in zip(out["shared"], out["plain"], strict=True) for a, b in zip(ra, rb, strict=True))
        for arm in ("shared", "plain"):
            run = total - (shared_tokens if arm == "shared" else 0)
            print(f"| {game} | {len(queries)} | {scores} | {arm} | {run} of {total} | "
                  + ", ".join(f"{w:.1f} s" for w in walls[arm]) + f" | {gap:.2e} |")


if __name__ == "__main__":
    main()
