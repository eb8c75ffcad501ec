"""The held-out evaluation set: tool-use and logic tasks written for the project (``data/heldout.jsonl``).

Each line is ``{"skill": <seed skill>, "task": <prompt>, "contract": {...}}``; the seed skill's
validators accept every contract (tested), and a solver's answer is judged by the same
sandboxed checker as in training. None of these tasks is a seed example. In ``mode: heldout``
the game skips proposing and probing: the solvers answer a held-out task (the seed picks
which), so ``python -m arena.eval`` reports ``game/solver_accuracy`` with a 95% interval, and
``--compare-set`` compares a checkpoint with the base model on the same tasks.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from arena.games.skill_sp.loader import SKILLS_DIR, SkillPackage, load_library

HELDOUT = Path(__file__).parent / "data" / "heldout.jsonl"


@cache
def seed_library() -> dict[str, SkillPackage]:
    return load_library(SKILLS_DIR)


@cache
def load_heldout(path: str | None = None) -> tuple[dict, ...]:
    """The tasks of ``path`` (default: the packaged set); a malformed line is a ValueError naming it."""
    file = Path(path) if path else HELDOUT
    tasks = []
    for n, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"line {n}: not JSON ({exc})") from None
        if not isinstance(row, dict) or set(row) != {"skill", "task", "contract"} or not isinstance(row["contract"], dict):
            raise ValueError(f'line {n}: expected {{"skill", "task", "contract"}}')
        if row["skill"] not in seed_library():
            raise ValueError(f"line {n}: unknown skill {row['skill']!r}")
        tasks.append(row)
    if not tasks:
        raise ValueError("no tasks")
    return tuple(tasks)


def heldout_tasks(source: str = "project", path: str | None = None) -> tuple[dict, ...]:
    """The held-out tasks of ``source``: the project's set (or ``path``), or BFCL's simple_python."""
    if source == "bfcl_simple":
        from arena.games.skill_sp.bfcl import load_bfcl

        return load_bfcl()
    return load_heldout(path)


@cache
def validators_for(skill: str) -> str:
    """The validators source that judges a held-out task of ``skill``."""
    if skill == "bfcl":
        from arena.games.skill_sp.bfcl import VALIDATORS

        return VALIDATORS.read_text()
    return seed_library()[skill].validators
