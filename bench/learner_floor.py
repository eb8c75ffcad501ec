"""The learner's update against its floor (issue #35): arena / bare / peak in one run, for three shapes.

For each batch shape it times one ``Learner.step`` (GRPO, one update, no KL, one micro-batch per
token budget) with ``learner.share_prompt_prefix`` on and off, and a bare PyTorch step on exactly the
same tokens (the three arms take turns, one step each a round, each keeping its fastest step): the
rows right-padded to the longest, one forward, the log-softmax at the completion positions only,
``-mean(A * logp)`` over the completion tokens, backward, fused AdamW. Beside them, the matmul peak
for the dtype (two n x n matrices, best of 5), and the share of the positions each forward runs that
is padding. The shapes (token counts as in the issue):

    kuhn   35 samples, ~150-token prompts whose first 120 tokens are the same, 2-6-token replies
    spyrl  24 samples, ~300-token prompts sharing their first 200 tokens (the system prompt up to
           the player), 32-token replies
    lsp    8 solvers on one ~60-token prompt, 32-token replies
    kuhn-real  the trained turns of 16 real Kuhn games (bench/profile_update.py ``kuhn_samples``: the
           chat template, 159-167-token prompts sharing 116, 2-token replies; a prompt is one of the 12
           information states, so most rows repeat another's prompt), token ids mod the model's vocabulary

Achieved FLOP/s count the matmul FLOPs of the tokens a plain (unshared, unpadded) run would need,
``6 * P * tokens`` (P: weights in linear layers, lm_head included), so sharing shows as more
useful FLOP/s, not fewer FLOPs. ``--profile`` prints torch.profiler's top operators of the arena step.

    OMP_NUM_THREADS=1 python bench/learner_floor.py                 # a random 4-layer Llama (small scale)
    python bench/learner_floor.py --model smollm2-135m --steps 3    # the built-in model
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

import torch  # noqa: E402

from arena.core.types import Sample  # noqa: E402
from arena.learners.batch import collate, pack  # noqa: E402
from arena.learners.config import LearnerConfig  # noqa: E402
from arena.learners.prefix import forward_cost  # noqa: E402
from arena.learners.update import Learner  # noqa: E402
from arena.policies.hardware import set_torch_threads  # noqa: E402

SHAPES = {  # name -> (samples, shared prefix, prompt tail lengths (min, max), reply lengths (min, max))
    "kuhn": (35, 120, (20, 40), (2, 6)),
    "spyrl": (24, 200, (80, 120), (32, 32)),
    "lsp": (8, 60, (0, 0), (32, 32)),
    "kuhn-real": (0, 0, (0, 0), (0, 0)),  # real prompts, not drawn (make_batch)
}


def make_batch(shape: str, vocab: int, seed: int = 0) -> list[Sample]:
    if shape == "kuhn-real":
        from profile_update import kuhn_samples
        from transformers import AutoTokenizer

        from arena.core.models import resolve_model

        real = kuhn_samples(AutoTokenizer.from_pretrained(resolve_model("smollm2-135m")), seed=seed)
        return [s.model_copy(update={"prompt_ids": [t % vocab for t in s.prompt_ids], "advantage": 1.0 if i % 2 else -1.0,
                                     "completion_ids": [t % vocab for t in s.completion_ids]}) for i, s in enumerate(real)]
    n, shared, (t_lo, t_hi), (c_lo, c_hi) = SHAPES[shape]
    g = torch.Generator().manual_seed(seed)

    def ids(k: int) -> list[int]:
        return torch.randint(3, vocab, (k,), generator=g).tolist()

    def between(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    head = ids(shared)
    return [Sample(prompt_ids=head + ids(between(t_lo, t_hi)), completion_ids=ids(between(c_lo, c_hi)),
                   advantage=1.0 if i % 2 else -1.0) for i in range(n)]


def random_llama(vocab: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512, pad_token_id=0)
    return LlamaForCausalLM(cfg).float()


def load(model: str) -> tuple[Any, int]:
    if model == "random":
        return random_llama(8192), 0
    from arena.core.models import load_causal_lm

    m, tok = load_causal_lm(model, dtype="float32")
    return m, tok.pad_token_id


def timed(fn: Any, steps: int) -> float:
    return interleaved({"": fn}, steps)[""]


def interleaved(fns: dict[str, Any], steps: int) -> dict[str, float]:
    """Each arm's fastest step, the arms taking turns (one step of each, ``steps`` rounds, after a
    warm-up of each): a drift of the machine's speed over the run (frequency, other jobs, the
    allocator warming up) falls on every arm alike instead of on whichever ran first."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(steps):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)  # the least disturbed step
    return best


def bare_step(model: Any, opt: Any, batch: list[Sample], pad: int, autocast: bool) -> None:
    """Forward, loss on the completion tokens, backward, AdamW: nothing else."""
    longest = max(s.length for s in batch)
    ids = torch.full((len(batch), longest), pad, dtype=torch.long)
    t_max = max(len(s.completion_ids) for s in batch)
    pos = torch.zeros((len(batch), t_max), dtype=torch.long)
    target = torch.zeros((len(batch), t_max), dtype=torch.long)
    mask = torch.zeros((len(batch), t_max))
    for r, s in enumerate(batch):
        p, t = len(s.prompt_ids), len(s.completion_ids)
        ids[r, : p + t] = torch.tensor(s.prompt_ids + s.completion_ids)
        pos[r, :t] = torch.arange(p - 1, p + t - 1)
        target[r, :t] = torch.tensor(s.completion_ids)
        mask[r, :t] = 1.0
    adv = torch.tensor([s.advantage for s in batch])
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        hidden = model.model(input_ids=ids).last_hidden_state  # right padding: causal, no mask needed
        h = hidden.gather(1, pos[..., None].expand(-1, -1, hidden.shape[-1]))
        logp = torch.log_softmax(model.lm_head(h).float(), -1).gather(-1, target[..., None]).squeeze(-1)
    loss = -(adv[:, None] * logp * mask).sum() / mask.sum()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def matmul_peak(dtype: torch.dtype, n: int) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.matmul(a, b)
    best = min(timed(lambda: torch.matmul(a, b), 1) for _ in range(5))
    return 2 * n**3 / best


def padding(batch: list[Sample], share: bool, budget: int, pad: int) -> tuple[int, float]:
    """(positions arena's forwards run, the share of them that is padding) under its packing: with
    ``share``, a micro-batch whose rows repeat prompts runs each distinct prompt once
    (``forward_cost`` with ``distinct``, arena/learners/batch.py ``distinct_prompt_logits``)."""
    run = needed = 0
    for g in pack(batch, budget, share):
        mb = collate(batch, g, pad, torch.device("cpu"))
        c = mb.prefix_len if share else 0
        prompts, replies = [len(batch[i].prompt_ids) for i in g], [len(batch[i].completion_ids) for i in g]
        ran = ([len(q) for q in {tuple(batch[i].prompt_ids) for i in g}] if share and mb.prompt_of is not None
               else prompts)  # the prompts the forward runs
        run += forward_cost(prompts, replies, c, len(ran))
        needed += c + sum(q - c for q in ran) + sum(replies)
    return run, (run - needed) / run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="random", help="random (a 4-layer random Llama) or a model name/path")
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--steps", type=int, default=3,
                   help="rounds of one timed step per arm, the arms taking turns (the fastest counts), after a warm-up")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="bfloat16: autocast")
    p.add_argument("--budget", type=int, default=4096, help="learner.token_budget")
    p.add_argument("--matmul", type=int, default=1024)
    p.add_argument("--profile", action="store_true", help="torch.profiler's top operators of each arena step")
    args = p.parse_args()
    set_torch_threads(jobs=1, what="bench/learner_floor.py")
    base, pad = load(args.model)
    vocab = base.config.vocab_size
    linear = sum(m.weight.numel() for m in base.modules() if isinstance(m, torch.nn.Linear))
    autocast = args.dtype == "bfloat16"
    peak = matmul_peak(getattr(torch, args.dtype), args.matmul)
    rows: list[tuple[str, int, str, float, int, float]] = []
    for shape in args.shapes:
        batch = make_batch(shape, vocab)
        tokens = sum(s.length for s in batch)
        steps: dict[str, Any] = {}
        layout: dict[str, tuple[int, float]] = {}  # arm -> (positions run, padded share)
        for share in (False, True):
            cfg = LearnerConfig(lr=1e-5, beta=0.0, token_budget=args.budget, share_prompt_prefix=share,
                                autocast_bf16=autocast)
            learner = Learner(copy.deepcopy(base), cfg, pad)
            name = f"arena, share {'on' if share else 'off'}"
            steps[name] = lambda learner=learner: learner.step(batch)
            layout[name] = padding(batch, share, args.budget, pad)
            if args.profile and share:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    learner.step(batch)
                print(f"\n{shape}, arena step (share on), top operators by self CPU time:\n"
                      + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8) + "\n")
        model = copy.deepcopy(base)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
        longest = max(s.length for s in batch)
        steps["bare (padded to longest)"] = lambda model=model, opt=opt: bare_step(model, opt, batch, pad, autocast)
        layout["bare (padded to longest)"] = (len(batch) * longest, 1 - tokens / (len(batch) * longest))
        best = interleaved(steps, args.steps)
        rows += [(shape, tokens, arm, best[arm], *layout[arm]) for arm in steps]
        del steps
    peak = max(peak, matmul_peak(getattr(torch, args.dtype), args.matmul))  # before and after: the less disturbed
    print(f"model {args.model} ({linear / 1e6:.1f} M linear weights), {args.dtype}, threads {torch.get_num_threads()}, "
          f"{args.dtype} matmul peak ({args.matmul}^2, best before/after): {peak / 1e9:.1f} GFLOP/s\n")
    print("| shape | tokens | arm | time / step | positions run | padded share | useful GFLOP/s | of peak |")
    print("|---|---|---|---|---|---|---|---|")
    for shape, tokens, arm, sec, run, share_ in rows:
        flops = 6 * linear * tokens
        print(f"| {shape} | {tokens} | {arm} | {sec * 1e3:.0f} ms | {run} | {share_:.1%} | "
              f"{flops / sec / 1e9:.1f} | {flops / sec / peak:.0%} |")


if __name__ == "__main__":
    main()
