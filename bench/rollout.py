"""Rollout throughput: arena's batched SpyRL self-play vs the backend's own batched generate.

    .venv/bin/python bench/rollout.py [--envs 12] [--games 24] [--max-new-tokens 64] [--dtype bfloat16]

1. arena: the runner plays ``--games`` SpyRL games, ``--envs`` at a time, with the
   built-in model on every seat; every generate call's prompts are recorded.
2. raw: the same prompts, in the same batches, with the same token budget and
   sampling settings, go straight to ``model.generate`` (transformers).
3. one-at-a-time: arena playing a game one turn per generate call.

Prints generated tokens/s for each, the arena/raw ratio (target >= 0.9), the
speed-up of batching over one turn at a time, and the peak memory (RSS).
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Sequence

import torch

from arena.runner import Runner, play_one_at_a_time
from games.spy import SpyGame
from policies.base import Completion, Request, SamplingParams
from policies.hf import HFPolicy


class Recording:
    """Wraps a policy and records each call's prompt ids."""

    def __init__(self, inner: HFPolicy):
        self.inner, self.name, self.batches = inner, inner.name, []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = self.inner.generate(requests)
        self.batches.append([c.prompt_ids for c in out])
        return out


def raw_generate(policy: HFPolicy, batches: list[list[list[int]]], params: SamplingParams) -> tuple[int, float]:
    model, tok = policy.model, policy.tokenizer
    tokens, start = 0, time.perf_counter()
    for batch in batches:
        plan = policy.plan_batches({i: len(p) + params.max_new_tokens for i, p in enumerate(batch)})
        for chunk in ([batch[i] for i in ids] for ids in plan):  # the very batches arena used
            enc = tok.pad({"input_ids": chunk}, padding=True, return_tensors="pt")
            with torch.inference_mode():
                out = model.generate(
                    **enc, do_sample=params.temperature > 0, temperature=params.temperature, top_p=params.top_p,
                    max_new_tokens=params.max_new_tokens, pad_token_id=tok.pad_token_id,
                )
            new = out[:, enc["input_ids"].shape[1] :]
            for row in new.tolist():
                n = len(row)
                for i, t in enumerate(row):
                    if t in policy.eos_ids:
                        n = i + 1
                        break
                tokens += n
    return tokens, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", type=int, default=12)
    ap.add_argument("--games", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--temperature", type=float, default=1.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    params = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    policy = HFPolicy("smollm2-135m", dtype=args.dtype, name="model")
    make_env = lambda: SpyGame(n_players=5, max_words=60, require_answer_line=False)  # noqa: E731

    policy.generate([Request(messages=[{"role": "user", "content": "warm up"}], params=params)])  # warm-up
    recorder = Recording(policy)
    runner = Runner(make_env, {"model": recorder}, sampling={"model": params}, num_envs=args.envs)
    before, start = policy.tokens_generated, time.perf_counter()
    runner.play(list(range(args.games)))
    arena_s = time.perf_counter() - start
    arena_tokens = policy.tokens_generated - before

    raw_tokens, raw_s = raw_generate(policy, recorder.batches, params)

    before, start = policy.tokens_generated, time.perf_counter()
    play_one_at_a_time(make_env(), {"model": policy}, seed=1000, sampling={"model": params})
    single_s = time.perf_counter() - start
    single_tokens = policy.tokens_generated - before

    arena_tps, raw_tps, single_tps = arena_tokens / arena_s, raw_tokens / raw_s, single_tokens / single_s
    turns = sum(len(b) for b in recorder.batches)
    print(f"model smollm2-135m ({args.dtype}), {args.games} games x 5 players, {args.envs} games at once, "
          f"{turns} turns in {len(recorder.batches)} generate calls, max_new_tokens {args.max_new_tokens}")
    print(f"{'':28}{'tokens':>8}{'seconds':>10}{'tokens/s':>10}")
    print(f"{'arena runner (batched)':28}{arena_tokens:>8}{arena_s:>10.1f}{arena_tps:>10.1f}")
    print(f"{'raw model.generate':28}{raw_tokens:>8}{raw_s:>10.1f}{raw_tps:>10.1f}")
    print(f"{'arena one turn at a time':28}{single_tokens:>8}{single_s:>10.1f}{single_tps:>10.1f}")
    print(f"ratio arena / raw generate: {arena_tps / raw_tps:.2f}x (target >= 0.9)")
    print(f"speed-up of batching over one turn at a time: {arena_tps / single_tps:.1f}x")
    print(f"peak memory (RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2:.2f} GB (target < 4)")


if __name__ == "__main__":
    main()
