"""Scripted LSP bots (tests, demos): ``(observation, rng) -> completion text``.

``default`` plays every seat well-formed: the challenger asks a marked arithmetic
query (two numbers from 1 to 99 and +, - or *), solvers answer it (right with probability 0.7), reward seats write a
number, judges a ``<Score>k</Score>``. ``coder`` does the same but answers in
Python code, the reward hack the paper saw. ``template`` asks from lsp.yaml's template
family (two whole numbers from 1 to 20 and + or -) and otherwise plays as ``default``: the
held-out queries on which ``bench/methods.py`` scores a trained solver.
"""

from __future__ import annotations

import numpy as np

from arena.games.lsp.rules import END, START, arithmetic_target
from arena.games.lsp.types import LspObservation


def _answer(obs: LspObservation, rng: np.random.Generator) -> str:
    target = arithmetic_target(obs.query)
    if isinstance(target, int):
        value = target if rng.random() < 0.7 else target + int(rng.integers(1, 10))
        return f"The answer is {value}."
    return "I am not sure, but here is my best attempt."


def default_bot(obs: LspObservation, rng: np.random.Generator) -> str:
    if obs.role == "challenger":
        a, b = (int(x) for x in rng.integers(1, 100, size=2))
        op = "+-*"[int(rng.integers(3))]
        return f"{START}\nWhat is {a} {op} {b}?\n{END}"
    if obs.role == "solver":
        return _answer(obs, rng)
    if obs.role == "reward":
        return repr(float(rng.normal()))
    k = int(rng.integers(8))
    return f"Fine. <Calculation>{'+'.join('1' * k) or '0'}={k}</Calculation>\n<Score>{k}</Score>"


def coder_bot(obs: LspObservation, rng: np.random.Generator) -> str:
    if obs.role == "solver":
        return f"```python\ndef solve():\n    return {_answer(obs, rng).split()[-1].rstrip('.')!r}\nprint(solve())\n```"
    return default_bot(obs, rng)


def template_bot(obs: LspObservation, rng: np.random.Generator) -> str:
    if obs.role == "challenger":
        a, b = (int(x) for x in rng.integers(1, 21, size=2))
        return f"{START}\nWhat is {a} {'+-'[int(rng.integers(2))]} {b}?\n{END}"
    return default_bot(obs, rng)


BOTS = {"default": default_bot, "coder": coder_bot, "template": template_bot}
