"""``train.descent`` (arena/loop/components/descent.py), issue #34: each step trains on Kuhn's whole tree against
the exact best response to the model's policy. On a random 2-layer model with SmolLM2's tokenizer (seconds a
step): the logged exploitability is the exact evaluation's, it falls, and a resume logs what the straight
run logs."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything
from tolerance import approx64

CONFIG = "games/openspiel/kuhn.ed.yaml"


def make(model: Path, run: Path, *extra: str, resume: bool = False) -> Trainer:
    sets = [f"policies.learner.model={model}", "runner.progress=false", "train.plot=false", "train.checkpoint_every=1",
            "learner.lr=1e-3", *extra]
    cfg = load_config(CONFIG, sets)
    seed_everything(cfg.train.seed)
    return Trainer(cfg, run, resume=run if resume else None)


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_exact_descent_lowers_the_models_exploitability(tiny_model_dir: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    make(tiny_model_dir, tmp_path / "run", "train.steps=6", "train.evals=[{name: x, kind: exact, every: 6}]").run()
    got = rows(tmp_path / "run")
    assert [r["step"] for r in got] == list(range(7))
    # step 1's number is the policy before any update: the step-0 evaluation's, from the same tree walk
    assert got[1]["descent/exploitability"] == approx64(got[0]["eval/x/exploitability"])
    assert all(r["samples"] == 24 and r["descent/states"] == 12 for r in got[1:])
    start, end = got[0]["eval/x/exploitability"], got[-1]["eval/x/exploitability"]
    assert end < start - 0.05, [r.get("descent/exploitability") for r in got]


def test_resume_descends_as_the_straight_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    """With a cosine learning rate too: the resumed step trains at the rate the straight run's does."""
    torch.set_num_threads(1)
    extra = ("train.steps=3", "train.evals=[]", "learner.lr_schedule=cosine", "learner.lr_end=1e-4")
    make(tiny_model_dir, tmp_path / "straight", *extra).run()
    make(tiny_model_dir, tmp_path / "resumed", *extra).run(max_steps=2)
    make(tiny_model_dir, tmp_path / "resumed", *extra, resume=True).run()
    assert rows(tmp_path / "straight") == rows(tmp_path / "resumed")


def test_the_descent_does_not_depend_on_the_seed(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Nothing is sampled: seeds 0 and 1 log the same numbers (the docs say seeds do not vary an ED run)."""
    torch.set_num_threads(1)
    make(tiny_model_dir, tmp_path / "a", "train.steps=2", "train.evals=[]", "train.seed=0").run()
    make(tiny_model_dir, tmp_path / "b", "train.steps=2", "train.evals=[]", "train.seed=1").run()
    assert rows(tmp_path / "a") == rows(tmp_path / "b")
