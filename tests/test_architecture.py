"""The layers hold: ``lint-imports`` checks the contracts of pyproject.toml ``[tool.importlinter]``
(imports go one way, down; arena.core imports no plug-in; policies, learners and games are
independent), and a planted upward import in a copy of the tree makes it fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")  # the venv's binary (the dev extra)
PACKAGES = ("arena", "examples")


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(cwd))  # the tree in cwd, not an installed copy
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_contracts_hold() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "arena" / "core" / "types.py"
    planted.write_text(planted.read_text(encoding="utf-8") + "\nimport arena.loop.trainer  # noqa: E402\n", encoding="utf-8")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "arena.core.types -> arena.loop.trainer" in result.stdout


def test_the_short_surface_for_game_authors() -> None:
    import arena
    from arena import GameConfig, Invalid, LLMGame, Message, Phase
    from arena.core.game import GameConfig as CoreConfig, Invalid as CoreInvalid, LLMGame as CoreGame, Phase as CorePhase
    from arena.core.messages import Message as CoreMessage

    assert (LLMGame, GameConfig, Phase, Invalid, Message) == (CoreGame, CoreConfig, CorePhase, CoreInvalid, CoreMessage)
    assert all(getattr(arena, name) is not None for name in arena.__all__)
