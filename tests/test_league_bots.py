"""Scripted opponents in the league (``train.league.bots``) on OpenSpiel's Kuhn poker: the CFR+ and
uniform bots are members for the whole run, drawn as training opponents and rated beside the
checkpoints. The trainable model is tests/test_league.py's 2-layer random model (real, small)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config
from arena.loop.trainer import Trainer, seed_everything
from test_league import tiny_model  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    "policies.learner.sampling.max_new_tokens=3", "runner.progress=false", "train.games_per_step=4", "train.steps=2",
    "train.checkpoint_every=1", "train.plot=false", "train.episodes.save=false", "train.loggers=[]", "train.evals=[]",
    "train.league.enabled=true", "train.league.bots=[scripted:cfr, scripted:random]", "train.league.sampler=uniform",
    "train.league.share=0.5", "train.league.eval_every=2", "train.league.eval_games=2", "train.league.bootstrap=20",
    "game.invalid.mode=na",
]


def test_bots_are_league_members_drawn_and_rated(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    seed_everything(0)
    cfg = load_config(ROOT / "arena/games/openspiel/kuhn.yaml", [f"policies.learner.model={tiny_model}", *SETS])
    trainer = Trainer(cfg, tmp_path / "run")
    rows = trainer.run()
    names = [m.name for m in trainer.feature("league").members]  # type: ignore[union-attr]
    assert names[:3] == ["base", "scripted:cfr", "scripted:random"] and "step_000002" in names
    state = json.loads((tmp_path / "run" / "checkpoints" / "step_000002" / "league" / "state.json").read_text())
    assert {"scripted:cfr", "scripted:random"} <= {m["name"] for m in state["members"]}
    rated = rows[-1]
    assert "league/rating" in rated and rated["league/pool_size"] >= 4
    opponents = [t for ep in trainer.feature("league").runner.play(trainer.feature("league").assign(3, trainer.specs(3))) for t in ep.turns  # type: ignore[union-attr]
                 if t.policy == "league"]
    assert opponents  # a drawn member plays seats in training games


def test_an_unknown_bot_is_one_line(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(ConfigError, match="train.league.bots") as e:
        Trainer(load_config(ROOT / "arena/games/openspiel/kuhn.yaml", [f"policies.learner.model={tiny_model}", *SETS,
                                                                 "train.league.bots=[scripted:nosuchbot]"]), tmp_path / "x")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="train.league: bots: .cfr. is not a scripted opponent"):
        load_config(ROOT / "arena/games/openspiel/kuhn.yaml", ["train.league.bots=[cfr]"])  # "train.league: bots: ..."
