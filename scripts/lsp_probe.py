"""Probe LSP's learning signal at a policy's start: play N games with the config's policies and
print what the learner would get (``python scripts/lsp_probe.py games/lsp/lsp.yaml --games 32``).

Printed: the share of challenger outputs with a checkable query, solver accuracy R, the share of
queries whose G answers disagree (so ``R - V(q)`` is non-zero), the spread of V(q) across queries
(the challenger's advantages), R_Q's mean, spread and parse rate, and a few transcripts. Loads the
models the config names; run it under the CPU lock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence

from arena.cli import run_cli
from arena.core.types import Episode
from arena.loop.config import load_config


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """The signal figures of a batch of LSP episodes (see the module docstring)."""
    answered = [ep for ep in episodes if ep.info.get("query")]
    values = [ep.metrics["R"] for ep in answered if "R" in ep.metrics]
    solver_r = [[t.reward for t in ep.turns if t.role == "solver"] for ep in answered]
    scores = [ep.metrics["R_Q"] for ep in answered if "R_Q" in ep.metrics]
    unparse = [ep.metrics["judge_unparseable_rate"] for ep in answered if "judge_unparseable_rate" in ep.metrics]
    judge_texts = [t.completion for ep in answered for t in ep.turns if t.role == "judge"]
    out = {
        "games": float(len(episodes)),
        "valid_query_rate": len(answered) / len(episodes) if episodes else 0.0,
        "R_mean": statistics.fmean(values) if values else 0.0,
        "queries_with_mixed_R": sum(0 < v < 1 for v in values) / len(values) if values else 0.0,
        "V_spread": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "solver_reward_spread": statistics.fmean(statistics.pstdev(r) for r in solver_r if len(r) > 1)
        if any(len(r) > 1 for r in solver_r) else 0.0,
    }
    if scores:
        out |= {
            "R_Q_mean": statistics.fmean(scores),
            "R_Q_spread": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
            "judge_unparseable_rate": statistics.fmean(unparse) if unparse else 0.0,
            "judge_distinct_replies": float(len(set(judge_texts))),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/lsp_probe.py", description=__doc__.split("\n")[0])
    p.add_argument("config", help="an LSP YAML config, e.g. games/lsp/lsp.yaml")
    p.add_argument("--games", type=int, default=32, help="number of games (queries)")
    p.add_argument("--seed", type=int, default=10_000, help="seed of the first game (away from training's)")
    p.add_argument("--show", type=int, default=6, help="transcripts to print")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    cfg = load_config(args.config, list(args.overrides))
    from arena.loop.build import build_policies, build_runner

    policies = build_policies(cfg, names=dict.fromkeys(cfg.seat_table().values()))
    runner = build_runner(cfg, policies, state=cfg.game.make_env().make_state(),
                          num_envs=min(args.games, cfg.runner.num_envs), progress=False)
    start = time.perf_counter()
    episodes = runner.play([args.seed + i for i in range(args.games)])
    elapsed = time.perf_counter() - start
    for ep in episodes[: args.show]:
        print(json.dumps({t.seat: t.completion for t in ep.turns} | {"target": ep.info.get("target")}))
    print(json.dumps(summarize(episodes) | {"seconds": round(elapsed, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    run_cli(main)
