"""A new author's path (#26): the brief's commands work as written, and PettingZoo's own tests pass unwrapped."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from arena.core.registry import GAMES, game_class, registered_games
from arena.loop.config import default_config_path, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(GAMES))
def test_games_name_yaml_resolves_to_the_games_own_yaml(name: str) -> None:
    given = f"games/{name}.yaml"
    assert not (ROOT / given).exists()
    assert default_config_path(given) == ROOT / "games" / name / f"{name}.yaml"
    assert load_config(given).game.name == name


def test_train_cli_with_games_name_yaml_reaches_config_validation() -> None:
    """As written in the brief: the file resolves, so the run stops at the planted config error (no model loads)."""
    proc = subprocess.run(
        [sys.executable, "-m", "arena.train", "games/spy.yaml", "--set", "train.steps=0"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no such config file" not in proc.stderr and "train.steps" in proc.stderr, proc.stderr
