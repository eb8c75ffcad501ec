"""python -m arena.train on Skill-SP with the built-in model (slow): the library travels with the checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from arena.games.skill_sp.controller import SkillLibrary

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "game.probes=2", "game.solvers=2", "game.evolution.max_new_tokens=16", "policies.learner.sampling.max_new_tokens=16",
    "policies.learner.phase_sampling.propose.max_new_tokens=32", "policies.base.sampling.max_new_tokens=16",
    "runner.num_envs=2", "train.games_per_step=2", "train.steps=1", "train.checkpoint_every=1", "train.plot=false",
    "train.evals=[]",  # the held-out evaluation inside training has its own tests (tests/test_train_evals.py)
]  # fmt: skip

pytestmark = pytest.mark.slow


def test_one_training_step_saves_the_library(tmp_path: Path) -> None:
    sets = [arg for item in TINY for arg in ("--set", item)]
    cmd = [sys.executable, "-m", "arena.train", "games/skill_sp/skill_sp.yaml", *sets, "--run-dir", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert row["state/library_size"] == 12.0 and "game/parsed" in row
    assert {"state/induced", "state/induce_rejected", "state/refined", "state/pruned"} <= set(row)
    saved = tmp_path / "checkpoints" / "step_000001" / "game_state"
    assert (saved / "skills" / "zebra_houses" / "SKILL.md").is_file() and (saved / "graph.json").is_file()
    library = SkillLibrary.load(saved)
    assert len(library.active()) == 12 and library.iteration == 1
