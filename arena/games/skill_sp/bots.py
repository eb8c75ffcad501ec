"""Scripted Skill-SP players for tests, demos and baselines.

* ``default`` (``half``): the proposer copies the routed skill's example task and
  contract (in the exploration stream it writes an arithmetic task from its random
  numbers); probes and solvers know the seed examples' reference solutions and give
  the right one with probability 1/2, else a random wrong answer, so ``v_solve``
  lands near the frontier and the plurality is usually the right answer.
* ``oracle``: the same, always right. ``guess``: the same proposer, never right.
"""

from __future__ import annotations

import json
import re
from functools import cache

import numpy as np

from arena.games.skill_sp.loader import load_library
from arena.games.skill_sp.types import SkillSpObservation

_ARITH = re.compile(r"Compute (\d+) \* (\d+) \+ (\d+)")


@cache
def _references() -> dict[str, str]:
    """Seed example task text -> its reference response (tool calls or answer) as JSON text."""
    out = {}
    for pkg in load_library().values():
        for ex in pkg.examples:
            out[ex.prompt] = json.dumps(ex.contract["calls"] if pkg.kind == "tool_use" else ex.contract["answer"])
    return out


def _propose(obs: SkillSpObservation, rng: np.random.Generator) -> str:
    if obs.skill:
        return f'Here is my task.\n{{"task": {json.dumps(obs.example_task)}, "contract": {obs.example_contract}}}'
    a, b, c = (int(x) for x in rng.integers(2, 50, size=3))
    expression = f"{a} * {b} + {c}"
    contract = {"answer": a * b + c, "calls": [{"tool": "calculate", "args": {"expression": expression}}]}
    return json.dumps({"task": f"Compute {expression} with the calculate tool.", "contract": contract})


def _right(obs: SkillSpObservation) -> str | None:
    m = _ARITH.search(obs.task)
    if m:
        return json.dumps({"tool": "calculate", "args": {"expression": f"{m[1]} * {m[2]} + {m[3]}"}})
    return _references().get(obs.task)


def _wrong(obs: SkillSpObservation, rng: np.random.Generator) -> str:
    n = int(rng.integers(100_000))
    if obs.kind == "tool_use":
        return json.dumps({"tool": "calculate", "args": {"expression": f"{n} + 0.5"}})
    return json.dumps({"guess": n})


def player(p_right: float):
    def bot(obs: SkillSpObservation, rng: np.random.Generator) -> str:
        if obs.role == "proposer":
            return _propose(obs, rng)
        right = _right(obs)
        if right is not None and rng.random() < p_right:
            return right
        return _wrong(obs, rng)

    return bot


BOTS = {"default": player(0.5), "half": player(0.5), "oracle": player(1.0), "guess": player(0.0)}
