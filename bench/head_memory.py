"""One learner update's peak memory with the chosen tokens scored a slice of the head at a time
(arena/learners/head.py) against the whole log-softmax, on the built-in model (issue #54).

    OMP_NUM_THREADS=1 .venv/bin/python bench/head_memory.py [--rows 24] [--prompt 280] [--completion 32]

Each arm runs in a fresh interpreter with glibc's mmap threshold kept as ``arena.train`` keeps it: the built-in model in float32 (``arena.core.models``' local folder), a
learner with the given ``token_budget`` and no KL reference, a first update (so AdamW's moments exist),
then the process's peak-RSS counter is reset (``/proc/self/clear_refs``) and a second update on the same rows
is measured (``VmHWM``, so no peak falls between samples). The rows are random tokens with distinct prompts
(the right-padded forward, as spy's rows take); ``--whole`` forces the whole log-softmax in the child. Prints
the RSS before the second update, its peak, and the difference, for both arms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20


def status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def child(args: argparse.Namespace) -> None:
    import torch

    import arena.learners.head as head
    from arena.core.memory import keep_mmap_threshold
    from arena.core.models import load_causal_lm
    from arena.core.types import Sample
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    keep_mmap_threshold()  # as arena.train does: freed blocks go back to the system
    if args.whole:
        head.PLAIN_LOGITS = frozenset()
    torch.manual_seed(0)
    model, _ = load_causal_lm("smollm2-135m", "float32")
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    samples = [Sample(prompt_ids=torch.randint(10, vocab, (args.prompt,), generator=gen).tolist(),
                      completion_ids=torch.randint(10, vocab, (args.completion,), generator=gen).tolist(),
                      advantage=float(torch.randn(1, generator=gen)), logprobs=[-1.0] * args.completion)
               for _ in range(args.rows)]
    learner = Learner(model, LearnerConfig(lr=1e-6, beta=0.0, token_budget=args.budget), 0, 1.0, None)
    learner.step(samples)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status_kib("VmRSS")
    stats = learner.step(samples)
    peak = status_kib("VmHWM")
    print(json.dumps({"before_mib": before / 1024, "peak_mib": peak / 1024, "micro_batches": stats["micro_batches"]}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=24)
    p.add_argument("--prompt", type=int, default=280)
    p.add_argument("--completion", type=int, default=32)
    p.add_argument("--budget", type=int, default=4096, help="learner.token_budget")
    p.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    shape = ["--rows", str(args.rows), "--prompt", str(args.prompt), "--completion", str(args.completion),
             "--budget", str(args.budget)]
    print(f"{args.rows} rows of {args.prompt} + {args.completion} tokens, token_budget {args.budget}")
    for name, extra in (("sliced head", []), ("whole log-softmax", ["--whole"])):
        out = subprocess.run([sys.executable, __file__, "--child", *shape, *extra], cwd=ROOT, env=dict(os.environ),
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:18s} before {r['before_mib']:7.0f} MiB  peak {r['peak_mib']:7.0f} MiB  "
              f"update +{r['peak_mib'] - r['before_mib']:5.0f} MiB  ({r['micro_batches']:.0f} micro-batches)")


if __name__ == "__main__":
    main()
