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

``--auso-overhead`` (loads the built-in model: run it under the CPU lock) times one
learner step on the same household turns three ways: plain GRPO, AUSO while
internalising (teacher probe + distillation term) and AUSO while utilising
(student no-grad pass + no-skill probe + advantage weights), and prints the ratios.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from arena.runner import Runner
from arena.games.household import HouseholdGame
from arena.games.household.bots import random_admissible
from arena.games.household.planner import plan
from arena.games.household.tasks import TASK_TYPES, make_task
from arena.policies.scripted import ScriptedPolicy


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


def auso_overhead(model_name: str, repeats: int = 2, max_new: int = 24) -> None:
    import copy

    from arena.core.models import load_causal_lm
    from arena.core.types import Sample
    from arena.runner import play_one_at_a_time
    from arena.learners.config import LearnerConfig
    from arena.learners.progress import Progress
    from arena.learners.update import Learner
    from arena.policies.base import chat_prompt_ids

    model, tok = load_causal_lm(model_name, dtype="float32")
    ref = copy.deepcopy(model).requires_grad_(False)
    samples = []
    for seed in range(4):  # 4 tasks x G = 4 attempts x 3 steps = 48 actions with real prompts
        game = HouseholdGame(attempts=4, max_steps=3, receptacles=(4, 6), objects=(3, 6), skills={"probes": True})
        ep = play_one_at_a_time(game, {"p": ScriptedPolicy(random_admissible)}, seed)
        for t in ep.turns:
            ids = tok(t.completion, add_special_tokens=False)["input_ids"][:max_new]
            samples.append(Sample(
                prompt_ids=chat_prompt_ids(tok, t.messages), completion_ids=ids, advantage=0.5 if t.seat < "agent_2" else -0.5,
                probes={k: chat_prompt_ids(tok, m) for k, m in t.probes.items()},
                extras={"group": ep.episode_id, "pass_rate": 0.0 if seed % 2 else 0.5, "finish_reason": "stop"},
            ))
    auso = [{"name": "auso_distill", "coef": 0.1}, {"name": "auso_utilise"}]
    runs = {"grpo": ([], Progress(10, 20)), "auso internalise": (auso, Progress(2, 20)),
            "auso utilise": (auso, Progress(20, 20))}
    times: dict[str, float] = {}
    for name, (objectives, progress) in runs.items():
        cfg = LearnerConfig(lr=1e-7, beta=0.01, kl_estimator="k3", token_budget=8192, objectives=objectives)
        learner = Learner(copy.deepcopy(model), cfg, tok.pad_token_id, 1.0, ref)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            learner.step(samples, progress)
            best = min(best, time.perf_counter() - start)
        times[name] = best
    base = times["grpo"]
    mean_prompt = sum(len(s.prompt_ids) for s in samples) / len(samples)
    print(f"{len(samples)} actions, mean prompt {mean_prompt:.0f} tokens, completions <= {max_new} tokens (best of {repeats})")
    for name, t in times.items():
        print(f"  {name:17s} {t:7.2f} s/step   x{t / base:.2f} of the GRPO step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--attempts", type=int, default=8)
    parser.add_argument("--auso-overhead", action="store_true", help="time GRPO vs AUSO learner steps (loads the model)")
    parser.add_argument("--model", default="smollm2-135m", help="--auso-overhead: model name or folder")
    args = parser.parse_args()
    if args.auso_overhead:
        auso_overhead(args.model)
        return
    print(f"world steps/s:   {world_steps():,.0f}")
    rate, success = env_turns(args.games, args.attempts)
    print(f"env turns/s:     {rate:,.0f}  ({args.games} games x G={args.attempts}, random admissible play, "
          f"success rate {success:.2f})")
    per_s, longest = plans()
    print(f"planner plans/s: {per_s:,.0f}  (longest plan {longest} steps over 200 tasks of all six types)")


if __name__ == "__main__":
    main()
