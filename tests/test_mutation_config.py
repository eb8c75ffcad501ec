"""`make mutation`'s configuration names files that exist: a module that moved (arena/loop/stop.py ->
arena/loop/components/stop.py, the exact layer out of arena/games/openspiel/) left mutmut mutating nothing there,
silently. Every mutated module and every selected test file exists, and every counted module is mutated."""

from __future__ import annotations

import tomllib
from pathlib import Path

import mutation_score

ROOT = Path(__file__).resolve().parents[1]


def test_every_mutated_module_and_selected_test_exists() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    paths = conf["only_mutate"] + conf["pytest_add_cli_args_test_selection"]
    assert [p for p in paths if not (ROOT / p).is_file()] == []
    assert [m for m in mutation_score.SCOPE if m not in conf["only_mutate"]] == []
