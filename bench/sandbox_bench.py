"""Sandbox throughput: runs per second through the Skill-SP sandbox pool vs the same call in-process.

    .venv/bin/python bench/sandbox_bench.py [--runs 64] [--workers 2]

Each run imports a small stdlib-only module and calls one function with JSON
arguments (the shape of a solver tool call or a validator check). The pool
starts one bubblewrap sandbox per run; in-process calls the function directly,
which is what the sandbox costs against. Prints one Markdown table row each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.games.skill_sp.sandbox import Job, Sandbox, SandboxPool, Status  # noqa: E402

MODULE = '''
import json

def lookup(document, path):
    """A JSON lookup: follow a dotted path through nested objects and lists."""
    node = json.loads(document)
    for key in path.split("."):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node
'''
KWARGS = {"document": '{"a": {"b": [1, 2, {"c": "found"}]}}', "path": "a.b.2.c"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    module = types.ModuleType("tool")
    exec(compile(MODULE, "tool", "exec"), module.__dict__)  # noqa: S102 - our own constant source
    n_inproc = 20000
    t0 = time.perf_counter()
    for _ in range(n_inproc):
        assert module.lookup(**KWARGS) == "found"  # noqa: S101
    inproc = n_inproc / (time.perf_counter() - t0)

    sandbox = Sandbox()
    t0 = time.perf_counter()
    one = [sandbox.call("tool", "lookup", KWARGS, {"tool.py": MODULE}) for _ in range(min(8, args.runs))]
    serial = len(one) / (time.perf_counter() - t0)
    with SandboxPool(sandbox, workers=args.workers) as pool:
        jobs = [Job(files={"tool.py": MODULE}, module="tool", function="lookup", kwargs=KWARGS)] * args.runs
        t0 = time.perf_counter()
        results = pool.map(jobs)
        pooled = len(results) / (time.perf_counter() - t0)
    ok = sum(r.status is Status.OK and r.value == "found" for r in results + one)
    print(f"| in-process call | 1 | {inproc:,.0f} runs/s |")
    print(f"| sandbox, one at a time | 1 | {serial:.1f} runs/s |")
    print(f"| sandbox pool | {args.workers} | {pooled:.1f} runs/s ({ok}/{len(results) + len(one)} ok) |")


if __name__ == "__main__":
    main()
