"""Household game throughput: is the game ever the bottleneck next to generation?

Three figures, all pure Python on one core, no model, per second of this process's CPU
time (so a loaded shared machine does not deflate them):

* world steps/s: ``World.step`` on random admissible actions (the rules alone);
* env turns/s: whole games through arena's :class:`~arena.runner.Runner` with a
  scripted policy that picks random admissible actions: prompt rendering,
  parsing, turn records, batching, G attempts per world (what a training step
  pays per generated completion, minus the model);
* planner: plans/s of the BFS planner over fresh tasks.

    .venv/bin/python bench/household_bench.py [--games 16] [--attempts 8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from arena.runner import Runner
from games.household import HouseholdGame
from games.household.bots import random_admissible
from games.household.planner import plan
from games.household.tasks import TASK_TYPES, make_task
from policies.scripted import ScriptedPolicy


def world_steps(seconds: float = 2.0) -> float:
    rng = np.random.default_rng(0)
    steps, start, world_id = 0, time.process_time(), 0
    while time.process_time() - start < seconds:
        _, world = make_task(world_id, TASK_TYPES)
        world_id += 1
        for _ in range(30):
            moves = list(world.admissible())
            world.step(moves[int(rng.integers(len(moves)))])
            steps += 1
    return steps / (time.process_time() - start)


def env_turns(games: int, attempts: int) -> tuple[float, float]:
    runner = Runner(lambda: HouseholdGame(attempts=attempts, task_types="all"),
                    {"p": ScriptedPolicy(random_admissible)}, num_envs=8)
    runner.play([0])  # warm-up: imports, the BM25 index
    start = time.process_time()
    episodes = runner.play(list(range(1, games + 1)))
    elapsed = time.process_time() - start
    turns = sum(len(ep.turns) for ep in episodes)
    return turns / elapsed, sum(ep.metrics["success_rate"] for ep in episodes) / len(episodes)


def plans(count: int = 200) -> tuple[float, int]:
    start, longest = time.process_time(), 0
    for world_id in range(count):
        task, world = make_task(world_id, TASK_TYPES)
        longest = max(longest, len(plan(world, task) or []))
    return count / (time.process_time() - start), longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--attempts", type=int, default=8)
    args = parser.parse_args()
    print(f"world steps/s:   {world_steps():,.0f}")
    rate, success = env_turns(args.games, args.attempts)
    print(f"env turns/s:     {rate:,.0f}  ({args.games} games x G={args.attempts}, random admissible play, "
          f"success rate {success:.2f})")
    per_s, longest = plans()
    print(f"planner plans/s: {per_s:,.0f}  (longest plan {longest} steps over 200 tasks of all six types)")


if __name__ == "__main__":
    main()
