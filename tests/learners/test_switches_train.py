"""Issue #51's learner switches through the trainer, which knows none of them: Kuhn in score mode on a tiny
random model (SmolLM2's tokenizer) with the magnet (an EMA of the weights), both entropy bonuses, a small
clip over several epochs, the bound and baselines per observation trains and logs them, and a run resumed
from its checkpoint logs what the straight run logs (the magnet's weights in ``optimizer.pt``, the
baselines in the estimators' state)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything

CONFIG = "games/openspiel/kuhn.score.yaml"
SWITCHES = [
    "learner.updates_per_batch=2", "learner.clip_low=0.025", "learner.clip_high=0.025", "learner.choice_entropy=0.1",
    "learner.token_entropy=0.05", "learner.bound.move=0.05",
    "learner.magnet={kind: ema, coef: 0.2, mix: 0.5, anneal: linear, coef_end: 0.05}",
    "learner.estimators.move={name: obs_baseline, credit: trajectory, trajectory_stats: turn, group_by: [phase],"
    " options: {alpha: 0.5}}",
]


def make(model: Path, run: Path, resume: bool = False) -> Trainer:
    sets = [f"policies.learner.model={model}", "train.games_per_step=8", "runner.num_envs=8", "runner.progress=false",
            "train.plot=false", "train.checkpoint_every=1", "learner.lr=3e-2", "train.steps=3", "train.evals=[]",
            *SWITCHES]
    cfg = load_config(CONFIG, sets)
    seed_everything(cfg.train.seed)
    return Trainer(cfg, run, resume=run if resume else None)


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_the_switches_train_and_resume_exactly(tiny_model_dir: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    make(tiny_model_dir, tmp_path / "straight").run()
    straight = rows(tmp_path / "straight")
    trained = [r for r in straight if r.get("samples", 0) > 0]
    assert len(trained) == 3
    assert [r["magnet/coef"] for r in trained] == pytest.approx([0.2, 0.125, 0.05])
    assert all(r["magnet/kl"] >= 0 and r["choice_entropy"] > 0 and "bound/stopped_frac" in r for r in trained)
    assert trained[-1]["obs_baseline/observations"] > 0
    make(tiny_model_dir, tmp_path / "resumed").run(max_steps=1)
    saved = torch.load(tmp_path / "resumed/checkpoints/step_000001/optimizer.pt", weights_only=False)
    assert saved["magnet"]["steps"] == 1 and saved["magnet"]["weights"]
    make(tiny_model_dir, tmp_path / "resumed", resume=True).run()
    assert rows(tmp_path / "resumed") == straight
