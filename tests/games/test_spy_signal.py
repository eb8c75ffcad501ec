"""scripts/spy_signal.py reads played games back and scores its overlap probe as the bots do."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from arena.core.types import write_jsonl
from arena.runner import Runner
from arena.games.spy import SpyGame
from arena.games.spy.bots import BOTS
from arena.policies.scripted import ScriptedPolicy

ROOT = Path(__file__).resolve().parents[2]


def _signal():
    spec = importlib.util.spec_from_file_location("spy_signal", ROOT / "scripts" / "spy_signal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task", ["math", "summary"])
def test_probe_and_model_accuracy_match_the_scripted_detectors(tmp_path: Path, task: str) -> None:
    signal = _signal()
    episodes = Runner(lambda: SpyGame(n_players=3, task=task), {"bot": ScriptedPolicy(BOTS["extractive"])}, num_envs=4).play(
        list(range(12))
    )
    path = tmp_path / "games.jsonl"
    write_jsonl(episodes, path)
    rows = [signal.game_row(json.loads(line)) for line in path.read_text().splitlines()]
    # The extractive civilians vote with the probe itself, so the two agree game by game,
    # and a spy that quotes its masked copy is always the odd one out.
    assert [r["probe_acc"] for r in rows] == [1.0] * 12
    assert [r["model_acc"] for r in rows] == [1.0] * 12
    assert [r["parseable"] for r in rows] == [1.0] * 12


def test_copycat_spy_leaves_the_probe_at_chance_or_below(tmp_path: Path) -> None:
    signal = _signal()
    episodes = Runner(lambda: SpyGame(n_players=3), {"bot": ScriptedPolicy(BOTS["copycat"])}, num_envs=4).play(list(range(12)))
    path = tmp_path / "games.jsonl"
    write_jsonl(episodes, path)
    rows = [signal.game_row(json.loads(line)) for line in path.read_text().splitlines()]
    assert np.mean([r["probe_acc"] for r in rows]) <= 1 / 3 + 1e-9
