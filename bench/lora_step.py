"""A LoRA learner step against a full step on the built-in model (CPU): time, peak RSS, achieved FLOP/s.

Each mode runs in its own process (peak RSS is a per-process high-water mark): load SmolLM2-135M
in float32, build the learner (``learner.lora`` or not), run one warm-up GRPO step and then
``--steps`` timed ones on a fixed batch (``--samples`` completions of ``--completion`` tokens after
a shared chat prompt, advantages +-1, one micro-batch). Also measured: this machine's float32
matmul peak, ``torch.matmul`` of two ``--matmul`` x ``--matmul`` matrices (2 n^3 FLOPs each, best of 5).

The FLOPs of a step are estimated from the matmuls (attention's own score/value products and
the element-wise work are left out, so achieved FLOP/s are a lower bound):

    forward  = 2 * P * T           P: weights in linear layers, lm_head (= hidden x vocab) included
    full     = forward * 3         backward = gradients of the activations (2PT) and of the weights (2PT)
    lora     = forward * 2 + 6 * P_lora * T    backward = activations only (the base weights get no gradient)

where T is the number of tokens in the batch (prompt and completion, every row). The learner also
runs the no-grad "old logprobs" pass only with ``updates_per_batch > 1`` (not here).

    python bench/lora_step.py            # both modes and the matmul peak; prints a markdown table
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def matmul_peak(n: int) -> float:
    """Best FLOP/s of ``torch.matmul`` on two n x n float32 matrices (5 tries after a warm-up)."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    best = min(_timed(lambda: torch.matmul(a, b)) for _ in range(5))
    return 2 * n**3 / best


def _timed(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def one_mode(mode: str, samples: int, completion: int, steps: int) -> dict[str, float]:
    import torch

    from arena.core.models import load_causal_lm
    from arena.core.types import Sample
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner
    from arena.policies.base import chat_prompt_ids

    model, tok = load_causal_lm("smollm2-135m", dtype="float32")
    prompt = chat_prompt_ids(tok, [{"role": "user", "content": "Name three fruits and say why you like each."}])
    g = torch.Generator().manual_seed(0)
    batch = [Sample(prompt_ids=prompt, completion_ids=torch.randint(100, 20000, (completion,), generator=g).tolist(),
                    advantage=1.0 if i % 2 else -1.0) for i in range(samples)]
    lora = {"r": 8, "alpha": 16.0} if mode == "lora" else None
    # share_prompt_prefix off: every row runs its whole sequence, as the FLOP count assumes.
    cfg = LearnerConfig(lr=1e-5, beta=0.0, token_budget=100_000, share_prompt_prefix=False, lora=lora)
    learner = Learner(model, cfg, tok.pad_token_id)
    linear = sum(m.weight.numel() for n, m in learner.module.named_modules()
                 if isinstance(m, torch.nn.Linear) and "lora_" not in n)
    trained = sum(p.numel() for p in learner._trained())
    tokens = samples * (len(prompt) + completion)
    learner.step(batch)  # warm-up
    times = [_timed(lambda: learner.step(batch)) for _ in range(steps)]
    step_s = sorted(times)[len(times) // 2]
    flops = 6 * linear * tokens if mode == "full" else 4 * linear * tokens + 6 * trained * tokens
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB
    return {"step_s": step_s, "peak_rss_mib": rss, "trained_params": trained, "tokens": tokens,
            "flops": flops, "flop_per_s": flops / step_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["full", "lora"])
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--completion", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--matmul", type=int, default=2048)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(one_mode(args.mode, args.samples, args.completion, args.steps)))
        return
    import torch

    rows = {}
    for mode in ("full", "lora"):
        cmd = [sys.executable, __file__, "--mode", mode, "--samples", str(args.samples),
               "--completion", str(args.completion), "--steps", str(args.steps)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ)).stdout
        rows[mode] = json.loads(out.strip().splitlines()[-1])
    peak = matmul_peak(args.matmul)
    print(f"threads {torch.get_num_threads()}, batch {args.samples} x {rows['full']['tokens'] // args.samples} tokens; "
          f"float32 matmul peak ({args.matmul}^2): {peak / 1e9:.1f} GFLOP/s\n")
    print("| step | trained params | time / step | peak RSS | est. GFLOP | achieved GFLOP/s | of matmul peak |")
    print("|---|---|---|---|---|---|---|")
    for mode, r in rows.items():
        print(f"| {mode} | {r['trained_params'] / 1e6:.2f} M | {r['step_s']:.2f} s | {r['peak_rss_mib']:.0f} MiB | "
              f"{r['flops'] / 1e9:.0f} | {r['flop_per_s'] / 1e9:.1f} | {r['flop_per_s'] / peak:.0%} |")


if __name__ == "__main__":
    main()
