"""Seconds per GRPO step: arena's learner vs TRL's GRPOTrainer on the same work, in one run.

    .venv/bin/pip install -e '.[bench]'      # TRL is a benchmark-only dependency
    .venv/bin/python bench/grpo_vs_trl.py [--steps 4] [--group 8] [--max-new-tokens 32] [--beta 0.04]

Both sides: the built-in SmolLM2-135M (float32 weights), one prompt per step,
``--group`` sampled completions of up to ``--max-new-tokens`` tokens, the same
reward function (a verifiable arithmetic check plus a brevity term), group-normalised
advantages, clipped surrogate with a KL term ``--beta`` to the frozen reference,
AdamW at the same learning rate, one optimizer step per batch.
The first step of each side is warm-up and not timed.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

import torch

PROMPTS = [f"What is {a} + {b}? Reply with the number only." for a, b in [(12, 7), (30, 45), (8, 9), (101, 22), (64, 36), (7, 77), (15, 16), (250, 250)]]


def reward(prompt: str, completion: str) -> float:
    a, b = (int(x) for x in re.findall(r"\d+", prompt)[:2])
    found = re.findall(r"-?\d+", completion)
    correct = 1.0 if found and int(found[0]) == a + b else 0.0
    return correct - 0.01 * len(completion.split())


def arena_steps(args: argparse.Namespace, bf16: bool | str) -> list[float]:
    from arena.core.models import load_causal_lm
    from arena.core.types import Sample
    from arena.learners.advantages import grpo
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner
    from arena.policies.base import Request, SamplingParams
    from arena.policies.hf import HFPolicy

    weights = bf16 == "weights"  # bf16 weights + fp32 master: the generator runs on the learner's own model
    gen = HFPolicy("smollm2-135m", dtype="bfloat16" if bf16 else "float32", name="arena")
    model, tokenizer = (load_causal_lm("smollm2-135m", dtype="float32") if bf16 and not weights
                        else (gen.model, gen.tokenizer))
    ref, _ = load_causal_lm("smollm2-135m", dtype="float32")
    ref.requires_grad_(False)
    cfg = LearnerConfig(lr=1e-6, beta=args.beta, kl_estimator="k3", drop_zero_variance=False,
                        autocast_bf16=bool(bf16) and not weights, param_dtype="bfloat16" if weights else "float32")
    learner = Learner(model, cfg, tokenizer.pad_token_id, temperature=1.0, ref_model=ref)
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    times = []
    for step in range(args.steps + 1):
        start = time.perf_counter()
        prompt = PROMPTS[step % len(PROMPTS)]
        reqs = [Request(messages=[{"role": "user", "content": prompt}], params=params, seed=step * 100 + g) for g in range(args.group)]
        comps = gen.generate(reqs)
        rewards = torch.tensor([reward(prompt, c.text) for c in comps], dtype=torch.float64)
        adv = grpo(rewards, torch.zeros(len(comps), dtype=torch.long))
        samples = [Sample(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs, advantage=float(a)) for c, a in zip(comps, adv, strict=True)]
        learner.step(samples)
        if gen.model is not model:  # weight sync into the bf16 generator
            gen.model.load_state_dict(model.state_dict())
        times.append(time.perf_counter() - start)
    return times[1:]


def trl_steps(args: argparse.Namespace, bf16: bool) -> list[float]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from arena.core.models import resolve_model

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.marks: list[float] = []

        def on_step_begin(self, *a, **k):  # noqa: ANN002, ANN003
            self.marks.append(time.perf_counter())

        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            self.marks.append(time.perf_counter())

    def reward_fn(prompts, completions, **_):  # noqa: ANN001, ANN003
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        users = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
        return [reward(p, c) for p, c in zip(users, texts, strict=True)]

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS])
    config = GRPOConfig(
        output_dir="/tmp/arena-bench-trl", per_device_train_batch_size=args.group, num_generations=args.group,
        max_completion_length=args.max_new_tokens, beta=args.beta, learning_rate=1e-6, max_steps=args.steps + 1,
        logging_steps=1, report_to=[], use_cpu=True, save_strategy="no", temperature=1.0, seed=0,
        gradient_accumulation_steps=1, bf16=bf16, dataloader_num_workers=0,
    )
    timer = Timer()
    trainer = GRPOTrainer(model=resolve_model("smollm2-135m"), reward_funcs=reward_fn, args=config, train_dataset=data, callbacks=[timer])
    trainer.train()
    pairs = list(zip(timer.marks[::2], timer.marks[1::2], strict=False))
    return [end - begin for begin, end in pairs][1:]


ROWS = [
    ("TRL GRPOTrainer, fp32 (TRL's CPU default)", "trl", False),
    ("TRL GRPOTrainer, bf16=True", "trl", True),
    ("arena, fp32 generation + fp32 learner", "arena", False),
    ("arena, bf16 generation + bf16-autocast learner", "arena", True),
    ("arena, bf16 weights + fp32 master (param_dtype), shared", "arena", "weights"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--beta", type=float, default=0.04)
    ap.add_argument("--row", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.row is not None:  # one configuration, in its own process
        _, side, bf16 = ROWS[args.row]
        times = (trl_steps if side == "trl" else arena_steps)(args, bf16)
        print("TIMES " + " ".join(f"{t:.4f}" for t in times))
        return
    rows = []
    for i, (label, _, _) in enumerate(ROWS):
        # Each configuration runs in a fresh process so that neither side inherits
        # the other's threads, allocator state or warmed caches.
        proc = subprocess.run(
            [sys.executable, __file__, "--row", str(i), "--steps", str(args.steps), "--group", str(args.group),
             "--max-new-tokens", str(args.max_new_tokens), "--beta", str(args.beta)],
            capture_output=True, text=True,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("TIMES ")), None)
        if proc.returncode != 0 or line is None:
            print(f"{label}: failed ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})")
            continue
        times = [float(x) for x in line.split()[1:]]
        rows.append((label, statistics.median(times), times))
    print(f"GRPO step: 1 prompt x {args.group} completions, <= {args.max_new_tokens} new tokens, beta {args.beta}, "
          "SmolLM2-135M (fp32 master weights), CPU; median over steps after one warm-up step")
    for label, median, times in rows:
        print(f"{label:62} {median:6.2f} s/step  ({', '.join(f'{t:.2f}' for t in times)})")
    trl = [m for label, m, _ in rows if label.startswith("TRL")]
    arena = [m for label, m, _ in rows if label.startswith("arena")]
    if len(trl) == 2 and len(arena) >= 2:
        from arena.policies.hardware import fast_bf16

        # arena's default precision here: `dtype: auto` / `autocast_bf16: auto` pick bf16 only
        # where it is fast (CUDA, CPUs with AVX512-BF16/AMX), else fp32.
        default = 1 if fast_bf16("cpu") else 0
        print(f"speed-up, arena's default on this CPU ({'bf16' if default else 'fp32'}) vs TRL bf16=True: "
              f"{trl[1] / arena[default]:.2f}x (target >= 2)")
        print(f"speed-up, arena bf16 vs TRL bf16=True (same precision): {trl[1] / arena[1]:.2f}x")
        print(f"speed-up, arena fp32 vs TRL fp32 (same precision): {trl[0] / arena[0]:.2f}x")
        if len(arena) > 2:
            print(f"speed-up, arena bf16 weights vs TRL bf16=True: {trl[1] / arena[2]:.2f}x")


if __name__ == "__main__":
    main()
