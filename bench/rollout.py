"""Rollout throughput: arena's batched SpyRL self-play vs the backend's own batched generate.

    .venv/bin/python bench/rollout.py [--backend hf|vllm|both] [--envs 12] [--games 12] [--max-new-tokens 64]

For each backend:
1. arena: the runner plays ``--games`` SpyRL games, ``--envs`` at a time, with the
   built-in model on every seat; every generate call's prompts are recorded.
2. raw: the same prompts, in the same batches, with the same token budget and
   sampling settings, go straight to the backend (``model.generate`` for
   transformers, ``LLM.generate`` for vLLM).
3. (vLLM) raw, same requests: ``LLM.generate`` with what arena asks of the engine on top,
   each request's own seed (reproducible episodes) and the sampled tokens' logprobs (the
   learner's old logprobs and the canary). arena / this is arena's own overhead; this /
   plain raw is the engine's cost of seeds and logprobs: where the rest of the time goes.
4. (hf) one-at-a-time: arena playing a game one turn per generate call.

Prints generated tokens/s, the arena/raw ratio (target >= 0.9), the speed-up of
batching over one turn at a time, vLLM vs transformers under arena, and the
peak memory (RSS) of the process.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Sequence

import torch

from arena.runner import Runner, play_one_at_a_time
from arena.games.spy import SpyGame
from arena.policies.base import Completion, Request, SamplingParams
from arena.policies.hf import HFPolicy


class Recording:
    """Wraps a policy and records each call's prompt ids."""

    def __init__(self, inner: HFPolicy):
        self.inner, self.name, self.batches, self.seeds = inner, inner.name, [], []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = self.inner.generate(requests)
        self.batches.append([c.prompt_ids for c in out])
        self.seeds.append([r.seed for r in requests])
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


def raw_vllm(policy, batches: list[list[list[int]]], params: SamplingParams,  # noqa: ANN001
             seeds: list[list[int | None]] | None = None) -> tuple[int, float]:
    """``LLM.generate`` on the recorded batches; with ``seeds``, each request seeded and with logprobs=0."""
    from vllm import SamplingParams as VSP
    from vllm.inputs import TokensPrompt

    plain = VSP(temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_new_tokens)
    tokens, start = 0, time.perf_counter()
    for b, batch in enumerate(batches):
        sp: VSP | list[VSP] = plain
        if seeds is not None:
            sp = [VSP(temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_new_tokens,
                      seed=seed, logprobs=0) for seed in seeds[b]]
        outs = policy.llm.generate([TokensPrompt(prompt_token_ids=p) for p in batch], sp, use_tqdm=False)
        tokens += sum(len(o.outputs[0].token_ids) for o in outs)
    return tokens, time.perf_counter() - start


def bench_vllm(args: argparse.Namespace, params: SamplingParams, make_env) -> float:  # noqa: ANN001
    from arena.policies.vllm import VLLMPolicy

    policy = VLLMPolicy("smollm2-135m", dtype=args.dtype, max_model_len=2048, name="model", seeded=not args.unseeded)
    policy.generate([Request(messages=[{"role": "user", "content": "warm up"}], params=params)])
    # Warm-up on other seeds: the CPU kernels are built per shape on first use.
    Runner(make_env, {"model": policy}, sampling={"model": params}, num_envs=args.envs).play(list(range(10_000, 10_000 + args.envs)))
    recorder = Recording(policy)
    runner = Runner(make_env, {"model": recorder}, sampling={"model": params}, num_envs=args.envs)
    policy.llm.reset_prefix_cache()  # both sides start cold: raw replays the SAME prompts
    before, start = policy.tokens_generated, time.perf_counter()
    runner.play(list(range(args.games)))
    arena_s = time.perf_counter() - start
    arena_tokens = policy.tokens_generated - before
    policy.llm.reset_prefix_cache()
    raw_tokens, raw_s = raw_vllm(policy, recorder.batches, params)
    same_tokens, same_s = raw_tokens, raw_s
    if policy.seeded:
        policy.llm.reset_prefix_cache()
        same_tokens, same_s = raw_vllm(policy, recorder.batches, params, recorder.seeds)
    arena_tps, raw_tps, same_tps = arena_tokens / arena_s, raw_tokens / raw_s, same_tokens / same_s
    mode = "seeded" if policy.seeded else "unseeded"
    print(f"vLLM ({mode}): {args.games} games, {sum(len(b) for b in recorder.batches)} turns in "
          f"{len(recorder.batches)} generate calls")
    print(f"{'':40}{'tokens':>8}{'seconds':>10}{'tokens/s':>10}")
    print(f"{'arena runner (vLLM)':40}{arena_tokens:>8}{arena_s:>10.1f}{arena_tps:>10.1f}")
    print(f"{'raw LLM.generate':40}{raw_tokens:>8}{raw_s:>10.1f}{raw_tps:>10.1f}")
    if policy.seeded:
        print(f"{'raw LLM.generate, seeds + logprobs':40}{same_tokens:>8}{same_s:>10.1f}{same_tps:>10.1f}")
    print(f"ratio arena / raw vLLM generate: {arena_tps / raw_tps:.2f}x (target >= 0.9)")
    if policy.seeded:
        print(f"  of which arena's own overhead (arena / raw with the same seeds and logprobs): {arena_tps / same_tps:.2f}x")
        print(f"  and the engine's cost of per-request seeds + logprobs (raw same / raw plain): {same_tps / raw_tps:.2f}x")
    return arena_tps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["hf", "vllm", "both"], default="both")
    ap.add_argument("--envs", type=int, default=12)
    ap.add_argument("--games", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--unseeded", action="store_true", help="vLLM: no per-request seeds (faster, not reproducible)")
    args = ap.parse_args()
    torch.manual_seed(0)
    params = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    make_env = lambda: SpyGame(n_players=5, max_words=60, require_answer_line=False)  # noqa: E731
    hf_tps = bench_hf(args, params, make_env) if args.backend in ("hf", "both") else None
    vllm_tps = bench_vllm(args, params, make_env) if args.backend in ("vllm", "both") else None
    if hf_tps and vllm_tps:
        print(f"under arena, vLLM vs transformers: {vllm_tps / hf_tps:.2f}x")
    print(f"peak memory (RSS) of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2:.2f} GB")


def bench_hf(args: argparse.Namespace, params: SamplingParams, make_env) -> float:  # noqa: ANN001
    policy = HFPolicy("smollm2-135m", dtype=args.dtype, name="model")

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
    print(f"transformers: smollm2-135m ({args.dtype}), {args.games} games x 5 players, {args.envs} games at once, "
          f"{turns} turns in {len(recorder.batches)} generate calls, max_new_tokens {args.max_new_tokens}")
    print(f"{'':28}{'tokens':>8}{'seconds':>10}{'tokens/s':>10}")
    print(f"{'arena runner (batched)':28}{arena_tokens:>8}{arena_s:>10.1f}{arena_tps:>10.1f}")
    print(f"{'raw model.generate':28}{raw_tokens:>8}{raw_s:>10.1f}{raw_tps:>10.1f}")
    print(f"{'arena one turn at a time':28}{single_tokens:>8}{single_s:>10.1f}{single_tps:>10.1f}")
    print(f"ratio arena / raw generate: {arena_tps / raw_tps:.2f}x (target >= 0.9)")
    print(f"speed-up of batching over one turn at a time: {arena_tps / single_tps:.1f}x")
    print(f"peak memory (RSS) after transformers: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2:.2f} GB (target < 4)")
    return arena_tps


if __name__ == "__main__":
    main()
