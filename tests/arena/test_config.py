"""Bad configuration fails at start-up with one line naming the field, the value and what is valid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arena.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
SPY_YAML = ROOT / "games" / "spy.yaml"


def _bad_yaml(tmp_path: Path, replace: str, by: str) -> Path:
    text = SPY_YAML.read_text()
    assert replace in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(replace, by, 1))
    return path


@pytest.mark.parametrize("name", ["spy.yaml", "spy.paper.yaml"])
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(ROOT / "games" / name)
    assert cfg.game.name == "spy"
    assert cfg.game.settings.n_players in (4, 5)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("  beta: 0.1", "  beta: 0.1\n  betta: 0.2", "game.betta: unknown key"),
        ("  mask_unit: words", "  mask_unit: words\n  mask_ratio: 1.5", "game.mask_ratio: Input should be less than 1 (got 1.5)"),
        ("n_players: 4", "n_players: 1", "game.n_players: Input should be greater than or equal to 3 (got 1)"),
        ("task: math", "task: poetry", "game.task: Input should be 'summary', 'story' or 'math' (got 'poetry')"),
        ("name: spy", "name: spyy", "game.name: unknown game 'spyy'; known: spy"),
        ("play:", "plya:", "plya: unknown key"),
        ("  lr: 2.0e-5", "  lr: -1", "learner.lr: Input should be greater than 0 (got -1)"),
        ('"*": trainable', '"*": trainabel', "seats.*: must be one of trainable, reference, human"),
        ("  mode: fixed", "  mode: sometimes", "train.schedule.mode: Input should be"),
    ],
)
def test_bad_yaml_one_line_naming_the_field(tmp_path: Path, replace: str, by: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_bad_yaml(tmp_path, replace, by))
    message = str(err.value)
    assert "\n" not in message
    assert expected in message, message


def test_set_overrides_and_their_errors() -> None:
    cfg = load_config(SPY_YAML, ["game.n_players=4", "game.task=math"])
    assert cfg.game.settings.n_players == 4  # type: ignore[attr-defined]
    cfg = load_config(SPY_YAML, ["game.n_players=6", "learner.lr=3e-6", "train.schedule.mode=joint"])
    assert cfg.game.settings.n_players == 6 and cfg.learner.lr == 3e-6  # type: ignore[attr-defined]
    assert cfg.train.schedule.mode == "joint"
    with pytest.raises(ConfigError, match=r"game.n_players: Input should be a valid integer"):
        load_config(SPY_YAML, ["game.n_players=many"])
    with pytest.raises(ConfigError, match=r"expected KEY=VALUE"):
        load_config(SPY_YAML, ["game.n_players"])


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text("game: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")


def test_cli_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = _bad_yaml(tmp_path, "n_players: 4", "n_players: 1")
    proc = subprocess.run(
        [sys.executable, "-m", "arena.play", str(path), "--policy", "scripted"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "game.n_players" in lines[0], proc.stderr
