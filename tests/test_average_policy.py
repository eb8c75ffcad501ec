"""``train.average`` (arena/loop/components/average.py): NFSP's average policy as a component of the loop.

The reservoir (algorithm R) and the supervised target are tested in tests/learners/test_average_target.py; a run with it plays and evaluates policy ``average``, saves it in its checkpoints and resumes it exactly; and a
config it cannot serve is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.core.errors import ConfigError
from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything

KUHN = "games/openspiel/kuhn.score.yaml"


def run(model: Path, folder: Path, *extra: str, resume: bool = False) -> Trainer:
    sets = [f"policies.learner.model={model}", "runner.progress=false", "train.plot=false", "train.loggers=[]",
            "train.games_per_step=8", "runner.num_envs=8", "train.checkpoint_every=1", "learner.lr=1e-3",
            "train.average={lr: 1e-3, buffer: 50, batch: 16, updates: 2}",
            "train.evals=[{name: avg, kind: exact, policy: average, every: 1}]", *extra]
    cfg = load_config(KUHN, sets)
    seed_everything(cfg.train.seed)
    return Trainer(cfg, folder, resume=folder if resume else None)


def rows(folder: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS and not k.startswith("time/")}
            for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_a_run_plays_evaluates_saves_and_resumes_the_average_policy(tiny_model_dir: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    straight = run(tiny_model_dir, tmp_path / "straight", "train.steps=2")
    straight.run()
    got = rows(tmp_path / "straight")
    assert [r["step"] for r in got] == [0, 1, 2]
    assert got[1]["average/records"] > 0 and got[2]["average/seen"] > got[1]["average/seen"]
    assert all("eval/avg/exploitability" in r for r in got)
    moved = got[2]["eval/avg/exploitability"] != got[0]["eval/avg/exploitability"]
    assert moved, "the average policy learned nothing from the iterates' moves"
    saved = tmp_path / "straight/checkpoints/step_000002/average"
    assert (saved / "model/config.json").is_file() and (saved / "reservoir.json").is_file()
    run(tiny_model_dir, tmp_path / "resumed", "train.steps=2").run(max_steps=1)
    run(tiny_model_dir, tmp_path / "resumed", "train.steps=2", resume=True).run()
    assert rows(tmp_path / "resumed") == got


def test_what_the_average_policy_cannot_serve_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"train.evals.x.policy: unknown policy 'average'; valid: learner$"):
        load_config(KUHN, ["train.evals=[{name: x, kind: exact, policy: average}]"])
    players = "games/openspiel/kuhn.players.yaml"
    with pytest.raises(ConfigError, match="train.average: the average policy follows one trainable policy, got 2"):
        load_config(players, ["train.average={}"])
    with pytest.raises(ConfigError, match=r"train.average.lr: Input should be greater than 0"):
        load_config(KUHN, ["train.average={lr: 0}"])
