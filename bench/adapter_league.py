"""An 8-member league as LoRA adapters on one vLLM engine, against the same league as full model copies
(issue #36): memory, generate calls per tick and rollout time.

Both arms play the same Kuhn poker tables (games/openspiel/kuhn.players.yaml's game): the current policy
against each member in turn, seats alternated, every table at once in one runner batch.

* ``adapters``: ONE engine over the built-in model, ``max_loras`` = members + 1; the current policy and each
  member is a :class:`~arena.policies.vllm.VLLMPolicy` on it with its own rank-8 adapter (q/k/v/o, random
  ``B``): one ``llm.generate`` call per tick.
* ``copies``: one engine per policy, each holding the whole model, as a league of full checkpoints would
  (the base weights stand in for each member's merged weights: same size, same arithmetic); the runner
  makes one call per policy per tick.

Each arm plays the tables once to warm up (adapters loaded, prefix caches filled), then again on other
seeds: the figures are the second play's. Memory is the process's resident set (``VmRSS``) grown while
an arm's engines start (the KV cache of each engine is ``--kv-cache-gb``, allocated when it starts), and
the model and adapter bytes on disk. CPU timings on a shared 2-core machine are indicative only; run
each arm in its own process (``--arms``) to keep one arm's memory out of the other's figure.

    OMP_NUM_THREADS=1 .venv/bin/python bench/adapter_league.py --members 8 --tables 16
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_adapters(base: str, folder: Path, n: int, rank: int) -> list[Path]:
    """``n`` rank-``rank`` adapters over ``base`` with small random ``B`` (distinct players, all legal)."""
    import torch

    from arena.core.models import load_causal_lm
    from arena.learners.lora import LoraConfig, apply_lora

    model = apply_lora(load_causal_lm(base, dtype="float32")[0], LoraConfig(r=rank, alpha=2.0 * rank))
    out = []
    for k in range(n):
        g = torch.Generator().manual_seed(k + 1)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        model.save_pretrained(folder / f"a{k}")
        out.append(folder / f"a{k}")
    return out


def play(policies: dict[str, Any], names: list[str], tables: int, max_new_tokens: int, seed: int) -> dict[str, float]:
    """The tables (current vs member k, seats alternated); ticks, runner calls and wall time."""
    from arena.loop.config import load_config
    from arena.policies.base import SamplingParams
    from arena.runner import EpisodeSpec, Runner, SeatMap, fixed_sampling

    ticks = [0]

    class Counting(Runner):
        def _tick(self, live: Any) -> None:
            ticks[0] += 1
            super()._tick(live)

    members = names[1:]
    specs = []
    for k in range(tables):
        pair = ("current", members[k % len(members)])
        a, b = pair if k % 2 == 0 else pair[::-1]
        specs.append(EpisodeSpec(seed=seed + k, seats=SeatMap({"player_0": a, "player_1": b})))
    sampling = fixed_sampling({n: SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens) for n in names})
    runner = Counting(load_config("games/openspiel/kuhn.players.yaml").game.make_env, policies,
                      SeatMap({"*": "current"}), sampling, num_envs=tables)
    t0 = time.perf_counter()
    episodes = runner.play(specs)
    return {"ticks": ticks[0], "runner_calls": runner.generate_calls, "play_s": time.perf_counter() - t0,
            "turns": sum(len(ep.turns) for ep in episodes)}


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--tables", type=int, default=16)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=6)
    ap.add_argument("--kv-cache-gb", type=float, default=0.25)
    ap.add_argument("--arms", default="adapters,copies")
    ap.add_argument("--out", default=None, help="append the result as one JSON line here")
    args = ap.parse_args()

    from arena.core.models import resolve_model
    from arena.policies.vllm import VLLMEngine, VLLMPolicy

    base = resolve_model(args.model)
    names = ["current", *[f"m{k}" for k in range(args.members)]]
    result: dict[str, Any] = {"model": args.model, "members": args.members, "tables": args.tables, "rank": args.rank,
                              "kv_cache_gb": args.kv_cache_gb, "model_mb": folder_mb(Path(base))}
    with tempfile.TemporaryDirectory() as tmp:
        adapters = make_adapters(base, Path(tmp), len(names), args.rank)
        result["adapter_mb"] = folder_mb(adapters[0])
        engine_kw = {"dtype": "float32", "max_model_len": 1024, "kv_cache_gb": args.kv_cache_gb}
        for arm in args.arms.split(","):
            before = rss_mb()
            t0 = time.perf_counter()
            if arm == "adapters":
                engine = VLLMEngine(base, lora_rank=args.rank, max_loras=len(names), **engine_kw)
                policies = {n: VLLMPolicy(str(a), name=n, engine=engine) for n, a in zip(names, adapters, strict=True)}
            else:
                policies = {n: VLLMPolicy(base, name=n, **engine_kw) for n in names}
            start_s = time.perf_counter() - t0
            grown = rss_mb() - before
            engines = {id(p.engine): p.engine for p in policies.values()}
            play(policies, names, args.tables, args.max_new_tokens, seed=0)  # warm: adapters loaded, caches built
            calls_before = sum(e.generate_calls for e in engines.values())
            figures = play(policies, names, args.tables, args.max_new_tokens, seed=1000)
            figures |= {"engines": len(engines), "rss_grown_mb": grown, "start_s": start_s,
                        "engine_calls": sum(e.generate_calls for e in engines.values()) - calls_before}
            figures["calls_per_tick"] = figures["engine_calls"] / figures["ticks"]
            result[arm] = figures
            print(arm, json.dumps(figures), flush=True)
    print(json.dumps(result))
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
