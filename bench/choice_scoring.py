"""Rollout time of one Kuhn step in ``action_mode: score`` (kuhn.score.yaml): 16 games played by
``Runner.play`` with the built-in model (SmolLM2-135M, float32, CPU), each model turn scoring both legal
actions (arena/policies/choices.py). Prints the wall time of each repeat, the model turns and the forward
passes the policy ran (counted by a forward hook on the model).

    OMP_NUM_THREADS=1 .venv/bin/python bench/choice_scoring.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from arena.games.openspiel import OpenSpielGame
from arena.policies.base import SamplingParams
from arena.policies.hf import HFPolicy
from arena.runner import Runner, SeatMap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--games", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    policy = HFPolicy(dtype="float32", name="learner")
    forwards = [0]
    policy.model.register_forward_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    runner = Runner(lambda: OpenSpielGame(game="kuhn_poker", action_mode="score"), {"m": policy},
                    SeatMap({"*": "m"}), {"m": SamplingParams(temperature=1.0, max_new_tokens=6)},
                    num_envs=args.games)
    for rep in range(args.repeats):
        forwards[0] = 0
        start = time.perf_counter()
        episodes = runner.play(list(range(rep * args.games, (rep + 1) * args.games)))
        wall = time.perf_counter() - start
        turns = sum(len(ep.turns) for ep in episodes)
        print(f"repeat {rep}: {args.games} games, {turns} model turns, {forwards[0]} forwards, {wall:.1f} s")


if __name__ == "__main__":
    main()
