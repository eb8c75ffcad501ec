"""arena.league: opponent samplers (pure) and the pool and ratings surviving an interruption and --resume.

The training test uses a tiny randomly initialised model with the built-in
tokenizer (about 1.6M parameters), so it runs the real trainer, runner,
league and checkpoints in seconds without loading SmolLM2's weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from arena.config import ConfigError, load_config
from arena.league import SAMPLERS, Member, pfsp_weights

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = [Member("base", "m", 0), Member("step_000002", "p2", 2), Member("step_000004", "p4", 4)]


def test_pfsp_draws_the_opponents_the_learner_beats_less_often_more():
    stats = {"base": (9.0, 10.0), "step_000002": (5.0, 10.0)}  # w = 10/12, 6/12, 1/2 (no games yet)
    w = pfsp_weights(MEMBERS, stats, power=2.0)
    raw = np.array([(1 - 10 / 12) ** 2, 0.25, 0.25])
    np.testing.assert_allclose(w, raw / raw.sum())
    rng = np.random.default_rng(0)
    drawn = [SAMPLERS["pfsp"](MEMBERS, stats, rng, 2.0).name for _ in range(2000)]
    assert drawn.count("base") < drawn.count("step_000002") / 3


def test_latest_and_uniform():
    rng = np.random.default_rng(0)
    assert SAMPLERS["latest"](MEMBERS, {}, rng, 2.0).name == "step_000004"
    drawn = [SAMPLERS["uniform"](MEMBERS, {}, rng, 2.0).name for _ in range(3000)]
    assert all(abs(drawn.count(m.name) / 3000 - 1 / 3) < 0.04 for m in MEMBERS)


def test_unknown_sampler_is_a_config_error():
    with pytest.raises(ConfigError, match="train.league: sampler must be one of latest, uniform, pfsp"):
        load_config(ROOT / "games/spy/spy.yaml", ["train.league.sampler=best"])


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer model with SmolLM2's tokenizer (real, small, fast)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from policies.models import resolve_model

    source = resolve_model("smollm2-135m")
    cfg = AutoConfig.from_pretrained(source)
    cfg.update({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 8})
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny") / "model"
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def league_config(model: Path):
    return load_config(ROOT / "games/spy/spy.yaml", [
        f"policies.learner.model={model}", "game.n_players=3", "policies.learner.sampling.max_new_tokens=6",
        "runner.num_envs=2", "runner.progress=false", "train.games_per_step=2", "train.steps=3",
        "train.checkpoint_every=1", "train.keep_checkpoints=3", "train.plot=false", "learner.lr=1e-3",
        "train.league.enabled=true", "train.league.pool_size=1", "train.league.share=0.34",
        "train.league.sampler=uniform", "train.league.eval_every=3", "train.league.eval_games=3",
        "train.league.bootstrap=50", "train.league.layouts=[{spy: 0}, {spy: 1}, {spy: 2}]",
    ])


def league_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k.startswith("league/") or k == "step"} for r in rows]


@pytest.fixture
def one_thread():
    """Tiny matmuls on a shared 2-core box run ~4x faster on one thread (measured)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow  # the real trainer for 6 steps: ~1 min of CPU, several on a loaded box
def test_pool_and_ratings_survive_an_interruption_and_resume_exactly(tiny_model: Path, tmp_path: Path, one_thread):
    from arena.trainer import Trainer, seed_everything

    cfg = league_config(tiny_model)
    seed_everything(0)
    Trainer(cfg, tmp_path / "straight").run()
    # The interrupted run: stopped after its step-2 checkpoint (checkpoints are atomic, so a kill at
    # any later moment leaves exactly this), then resumed in a fresh trainer.
    seed_everything(0)
    Trainer(cfg, tmp_path / "killed").run(max_steps=2)
    shutil.rmtree(tmp_path / "killed" / "checkpoints" / "step_000001")  # any kept checkpoint works; use the newest
    seed_everything(0)
    Trainer(cfg, tmp_path / "killed", resume=tmp_path / "killed").run()

    def state(run: str) -> dict:
        return json.loads((tmp_path / run / "checkpoints" / "step_000003" / "league" / "state.json").read_text())

    want = state("straight")
    assert [m["name"] for m in want["members"]] == ["base", "step_000003"]  # pool_size 1 keeps the newest
    assert [r["step"] for r in want["ratings"]] == [3.0] and set(want["stats"]) <= {"base", "step_000001", "step_000002"}
    assert state("killed") == want
    assert league_rows(tmp_path / "killed") == league_rows(tmp_path / "straight")
    rated = league_rows(tmp_path / "straight")[-1]
    assert rated["league/rating_low"] <= rated["league/rating"] <= rated["league/rating_high"]
    assert all(r["league/opponent_turns"] > 0 for r in league_rows(tmp_path / "straight"))  # played, counted apart
    # Members left the pool, but every kept checkpoint still names its own, so their weights stay on disk.
    pool = sorted(p.name for p in (tmp_path / "straight" / "league" / "pool").iterdir())
    assert pool == ["step_000001", "step_000002", "step_000003"]
    # The resumed run dropped checkpoint 1, so step_000001 (named by no kept checkpoint) was deleted.
    assert sorted(p.name for p in (tmp_path / "killed" / "league" / "pool").iterdir()) == ["step_000002", "step_000003"]
