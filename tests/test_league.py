"""arena.loop.components.league: opponent samplers (pure) and the pool and ratings surviving SIGKILL and --resume.

The training test uses a tiny randomly initialised model with the built-in
tokenizer (about 1.6M parameters), so it runs the real trainer, runner,
league and checkpoints in seconds without loading SmolLM2's weights.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config
from arena.loop.components.league import SAMPLERS, Member, pfsp_weights
from tolerance import approx64

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = [Member("base", "m", 0), Member("step_000002", "p2", 2), Member("step_000004", "p4", 4)]


def test_pfsp_draws_the_opponents_the_learner_beats_less_often_more():
    stats = {"base": (9.0, 10.0), "step_000002": (5.0, 10.0)}  # w = 10/12, 6/12, 1/2 (no games yet)
    w = pfsp_weights(MEMBERS, stats, power=2.0)
    raw = np.array([(1 - 10 / 12) ** 2, 0.25, 0.25])
    assert list(w) == approx64(list(raw / raw.sum()))
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
        load_config(ROOT / "arena/games/spy/spy.yaml", ["train.league.sampler=best"])


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: Path) -> Path:
    """A randomly initialised 2-layer model with SmolLM2's tokenizer (the session's, tests/conftest.py)."""
    return tiny_model_dir


LEAGUE_SETS = [
    "game.n_players=3", "policies.learner.sampling.max_new_tokens=6", "policies.learner.backend=hf",
    "runner.num_envs=2", "runner.progress=false", "train.games_per_step=2", "train.steps=4",
    "train.checkpoint_every=1", "train.keep_checkpoints=3", "train.plot=false", "learner.lr=1e-3",
    "train.league.enabled=true", "train.league.pool_size=1", "train.league.share=0.34",
    "train.league.sampler=uniform", "train.league.eval_every=2", "train.league.eval_games=3",
    "train.league.bootstrap=50", "train.league.layouts=[{spy: 0}, {spy: 1}, {spy: 2}]",
]


def league_config(model: Path):
    return load_config(ROOT / "arena/games/spy/spy.yaml", [f"policies.learner.model={model}", *LEAGUE_SETS])


def league_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k.startswith("league/") or k == "step"} for r in rows]


def train_cmd(model: Path, run: Path, *extra: str) -> list[str]:
    sets = [a for s in [f"policies.learner.model={model}", *LEAGUE_SETS] for a in ("--set", s)]
    return [sys.executable, "-m", "arena.train", "games/spy/spy.yaml", *sets, "--run-dir", str(run), *extra]


# Tiny matmuls on a shared 2-core box run ~4x faster on one thread (measured).
ONE_THREAD = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.mark.slow  # python -m arena.train three times on a tiny model: ~1 min of CPU
def test_pool_and_ratings_survive_sigkill_and_resume_exactly(tiny_model: Path, tmp_path: Path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    subprocess.run(train_cmd(tiny_model, straight), cwd=ROOT, env=ONE_THREAD, check=True, capture_output=True, timeout=600)

    # Killed as soon as step 2's checkpoint is complete: by then step 3 is under way (rollout,
    # update, the pool's copy of the new weights or the next checkpoint's write).
    proc = subprocess.Popen(train_cmd(tiny_model, killed), cwd=ROOT, env=ONE_THREAD,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (killed / "checkpoints" / "step_000002" / "state.json").exists():
        assert proc.poll() is None and time.time() < deadline, "run ended before its second checkpoint"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert league_rows(killed)[-1]["step"] < 4, "killed too late to test anything"
    subprocess.run(train_cmd(tiny_model, killed, "--resume", str(killed)), cwd=ROOT, env=ONE_THREAD,
                   check=True, capture_output=True, timeout=600)

    def state(run: Path) -> dict:
        return json.loads((run / "checkpoints" / "step_000004" / "league" / "state.json").read_text())

    want = state(straight)
    assert [m["name"] for m in want["members"]] == ["base", "step_000004"]  # pool_size 1 keeps the newest
    assert [r["step"] for r in want["ratings"]] == [2.0, 4.0]  # step 2's rating was taken before the kill
    assert state(killed) == want
    assert league_rows(killed) == league_rows(straight)
    rated = league_rows(straight)[-1]
    assert rated["league/rating_low"] <= rated["league/rating"] <= rated["league/rating_high"]
    assert all(r["league/opponent_turns"] > 0 for r in league_rows(straight))  # played, counted apart
    # Checkpoints 2-4 are kept, and each names its pool's members, so exactly their weights stay.
    pool = sorted(p.name for p in (straight / "league" / "pool").iterdir())
    assert pool == sorted(p.name for p in (killed / "league" / "pool").iterdir())
    assert "step_000001" not in pool
