"""Where the learner's update spends its time (issue #35): torch.profiler on one ``Learner.step``.

For each batch shape of bench/learner_floor.py (kuhn, spyrl, lsp: the token counts of the issue)
and each precision, one warm-up ``Learner.step`` (GRPO, one update, no KL, common prompt prefixes
run once as arena's default, or not with ``--share``), then one step under ``torch.profiler``.
The profiler's self CPU time per operator is summed into groups:

    matmul      aten::mm / addmm / bmm / matmul / linear (the lm_head's included)
    attention   scaled_dot_product_attention and its kernels and backward
    vocab       log-softmax over the vocabulary and its backward, the gather of the chosen
                tokens' log-probs (and any logsumexp / nll / cross-entropy)
    optimizer   AdamW (fused or foreach), the gradient-norm clip, zero_grad
    copies      cat, pad, copy_, to/_to_copy (autocast's casts), clone, index*, slicing backward,
                fill/zero (padding and data movement)
    other       every other operator (elementwise maths, norms, embedding, autograd's own records)
    outside     wall time of the profiled step minus the operators' self time: Python, the
                profiler's own cost, anything no operator records

The profiled step carries the profiler's own cost; the warm-up step's wall time (unprofiled, but the
first) is printed beside it. Precisions: float32, and bf16 autocast over fp32 weights (``learner.autocast_bf16``)
where the CPU has native bf16 instructions (AVX512-BF16 or AMX; elsewhere bf16 matmuls are far slower).

    OMP_NUM_THREADS=1 .venv/bin/python bench/profile_update.py          # the built-in SmolLM2-135M
    OMP_NUM_THREADS=1 .venv/bin/python bench/profile_update.py --model random --shapes lsp  # a smoke run

The defaults (the built-in model, three shapes, both precisions, prefix sharing on, ``token_budget``
1024) took about 6 minutes on one core of a shared 2-core machine, at a peak of 7 GB; ``--share both``
adds the unshared runs (about 10 minutes more). ``--padding`` prints the padded share of real Kuhn
prompts under arena's packing, and with length buckets, without running the model.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
from learner_floor import SHAPES, load, make_batch, padding  # noqa: E402

from arena.learners.config import LearnerConfig  # noqa: E402
from arena.learners.update import Learner  # noqa: E402
from arena.policies.hardware import cpu_bf16_flags, set_torch_threads  # noqa: E402

GROUPS = ("matmul", "attention", "vocab", "optimizer", "copies", "other")
MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm", "aten::_mm_dtype"}
VOCAB = ("log_softmax", "logsumexp", "nll_loss", "cross_entropy", "aten::gather", "gather_backward", "aten::scatter")
OPTIMIZER = ("adam", "optimizer", "_foreach_", "clip_grad", "zero_grad")
COPIES = {
    "aten::cat", "aten::pad", "aten::constant_pad_nd", "aten::copy_", "aten::to", "aten::_to_copy", "aten::clone",
    "aten::contiguous", "aten::index", "aten::index_select", "aten::index_put_", "aten::_index_put_impl_",
    "aten::slice_backward", "aten::select_backward", "aten::fill_", "aten::zero_", "aten::zeros", "aten::zeros_like",
    "aten::new_zeros", "aten::full", "aten::empty_like", "aten::expand_as", "aten::repeat", "aten::masked_fill",
    "aten::masked_fill_", "aten::where",
}


def group(name: str) -> str:
    """The group of one profiler event name (see the module docstring)."""
    low = name.lower()
    if name in MATMUL:
        return "matmul"
    if "scaled_dot_product" in low or "flash_attention" in low or "efficient_attention" in low:
        return "attention"
    if any(k in low for k in VOCAB):
        return "vocab"
    if any(k in low for k in OPTIMIZER):
        return "optimizer"
    if name in COPIES:
        return "copies"
    return "other"


def profile_step(learner: Learner, batch: list[Any]) -> tuple[float, float, dict[str, float], list[tuple[str, float]]]:
    """(warm-up wall s, profiled wall s, self seconds per group, top 8 operators) of one step each."""
    from torch.profiler import ProfilerActivity, profile

    t = time.perf_counter()
    learner.step(batch)
    warm = time.perf_counter() - t
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        learner.step(batch)
        wall = time.perf_counter() - t
    groups = dict.fromkeys(GROUPS, 0.0)
    ops: list[tuple[str, float]] = []
    for e in prof.key_averages():
        sec = e.self_cpu_time_total / 1e6
        groups[group(e.key)] += sec
        ops.append((e.key, sec))
    ops.sort(key=lambda o: -o[1])
    return warm, wall, groups, ops[:8]


def kuhn_samples(tokenizer: Any, games: int = 16, seed: int = 0) -> list[Any]:
    """The trained turns of ``games`` real Kuhn games (kuhn.yaml's game, both seats one policy that
    answers Pass or Bet at random): each prompt through the model's chat template, each reply its
    action's tokens and the end-of-turn token, as the learner receives them."""
    import numpy as np

    from arena.core.types import Sample
    from arena.games.openspiel import OpenSpielGame
    from arena.policies.base import Completion, SamplingParams, chat_prompt_ids
    from arena.runner import Runner, SeatMap

    seen: list[tuple[Any, str]] = []

    class Legal:  # a policy that plays a legal action at random and keeps each request
        name = "m"

        def generate(self, requests: Any) -> list[Completion]:
            out = []
            for req in requests:
                text = str(np.random.default_rng(req.seed).choice(["Pass", "Bet"]))
                seen.append((req, text))
                out.append(Completion(text=text))
            return out

    runner = Runner(lambda: OpenSpielGame(game="kuhn_poker"), {"m": Legal()}, SeatMap({"*": "m"}),
                    {"m": SamplingParams(temperature=1.0, max_new_tokens=6)}, num_envs=games)
    runner.play([seed * games + i for i in range(games)])
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return [Sample(prompt_ids=chat_prompt_ids(tokenizer, req.messages),
                   completion_ids=tokenizer.encode(text, add_special_tokens=False) + [end], advantage=1.0)
            for req, text in seen]


def bucketed(batch: list[Any], k: int, min_saved: int) -> tuple[int, float]:
    """(positions run, padded share) if the rows were cut into ``k`` micro-batches by suffix length
    (prompt after the common prefix, then the reply), each running its own common prefix once."""
    from arena.learners.prefix import forward_cost, shared_prefix_len

    order = sorted(range(len(batch)), key=lambda i: batch[i].length)
    run = real = 0
    for part in (order[j * len(order) // k:(j + 1) * len(order) // k] for j in range(k)):
        prompts = [batch[i].prompt_ids for i in part]
        replies = [len(batch[i].completion_ids) for i in part]
        c = shared_prefix_len(prompts, min_saved)
        run += forward_cost([len(q) for q in prompts], replies, c)
        real += c + sum(len(q) + t - c for q, t in zip(prompts, replies, strict=True))
    return run, (run - real) / run


def padding_report(model: str, budget: int) -> None:
    """The padded share of real Kuhn prompts (16 games) under arena's packing, and with length buckets."""
    from transformers import AutoTokenizer

    from arena.core.models import resolve_model
    from arena.learners.batch import MIN_SAVED
    from arena.learners.prefix import shared_prefix_len

    batch = kuhn_samples(AutoTokenizer.from_pretrained(resolve_model(model)))
    lens = sorted(len(s.prompt_ids) for s in batch)

    print(f"\nreal Kuhn prompts, 16 games: {len(batch)} samples, prompts {lens[0]}-{lens[-1]} tokens, "
          f"common prefix {shared_prefix_len([s.prompt_ids for s in batch])}, replies "
          f"{min(len(s.completion_ids) for s in batch)}-{max(len(s.completion_ids) for s in batch)} tokens, "
          f"{sum(s.length for s in batch)} tokens in all\n")
    print("| packing | positions run | padded share |\n|---|---|---|")
    for share in (False, True):
        run, pad_share = padding(batch, share, budget, 0)
        print(f"| arena, prefix sharing {'on' if share else 'off'} | {run} | {pad_share:.1%} |")
    for k in (2, 3, 4):
        run, pad_share = bucketed(batch, k, MIN_SAVED)
        print(f"| {k} length buckets, each its prefix once (not built) | {run} | {pad_share:.1%} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="a model name/path, or random (bench/learner_floor.py's)")
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    p.add_argument("--share", choices=["on", "off", "both"], default="on",
                   help="learner.share_prompt_prefix (on: arena's default; off: every row's whole prompt)")
    p.add_argument("--budget", type=int, default=1024,
                   help="learner.token_budget (arena's default is 4096; the peak memory grows with it: 5-7 GB at 1024, "
                   "over 10 GB at 4096 for the kuhn and spyrl shapes)")
    p.add_argument("--top", action="store_true", help="also print each run's top 8 operators")
    p.add_argument("--padding", action="store_true", help="only the padded share of real Kuhn prompts (no model run)")
    args = p.parse_args()
    if args.padding:
        padding_report("smollm2-135m" if args.model == "random" else args.model, args.budget)
        return
    set_torch_threads(jobs=1, what="bench/profile_update.py")
    flags = cpu_bf16_flags()
    dtypes = [d for d in args.dtypes if d == "float32" or flags]
    if dtypes != args.dtypes:
        print("bfloat16 skipped: this CPU lists neither avx512_bf16 nor amx_bf16", file=sys.stderr)
    base, pad = load(args.model)
    shares = {"on": [True], "off": [False], "both": [False, True]}[args.share]
    print(f"model {args.model}, threads {torch.get_num_threads()}, torch {torch.__version__}, token_budget {args.budget}, "
          f"CPU bf16 flags: {' '.join(flags) or 'none'}; self CPU time of one profiled Learner.step, share of its wall\n")
    head = ["shape", "tokens", "prefix shared", "positions run", "padded", "dtype", "step (warm-up)",
            "step (profiled)", *GROUPS, "outside ops"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    left = len(args.shapes) * len(shares) * len(dtypes)
    for shape in args.shapes:  # each row printed as it is measured: a run cut short keeps its rows
        batch = make_batch(shape, base.config.vocab_size)
        tokens = sum(s.length for s in batch)
        for share in shares:
            run, pad_share = padding(batch, share, args.budget, pad)
            for dtype in dtypes:
                cfg = LearnerConfig(lr=1e-5, beta=0.0, token_budget=args.budget, share_prompt_prefix=share,
                                    autocast_bf16=dtype == "bfloat16")
                left -= 1
                learner = Learner(copy.deepcopy(base) if left else base, cfg, pad)  # the last run: no copy
                warm, wall, groups, top = profile_step(learner, batch)
                del learner
                print(f"{shape} share {'on' if share else 'off'} {dtype}: warm-up {warm:.1f} s, profiled {wall:.1f} s",
                      file=sys.stderr, flush=True)
                if args.top:
                    print("\n".join(f"    {sec * 1e3:9.0f} ms  {name}" for name, sec in top), file=sys.stderr)
                cells = [f"{groups[g] / wall:.0%}" for g in GROUPS] + [f"{(wall - sum(groups.values())) / wall:.0%}"]
                print(f"| {shape} | {tokens} | {'yes' if share else 'no'} | {run} | {pad_share:.1%} | {dtype} | "
                      f"{warm:.1f} s | {wall:.1f} s | " + " | ".join(cells) + " |", flush=True)

if __name__ == "__main__":
    main()
