"""python -m arena.train end to end (slow): bad --set fails before any model loads; the vLLM backend trains.

Resume after SIGKILL is tested in tests/test_chaos.py (20 kills at random moments and
inside checkpoint writes, on a tiny model) and tests/test_league.py (the league's pool
and ratings); this file's own built-in-model kill test (one kill, about 270 s of the
suite) was retired for them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.loop.trainer import TIMING_KEYS

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "game.n_players=3", "game.task=math", "policies.learner.sampling.max_new_tokens=8", "runner.num_envs=2",
    "policies.learner.backend=hf",
    "runner.progress=false", "train.games_per_step=2", "train.steps=4", "train.checkpoint_every=1",
    "train.keep_checkpoints=5", "train.plot=false", "learner.beta=0.001", "learner.lr=1e-4",
]

pytestmark = pytest.mark.slow


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def test_bad_set_fails_before_any_model_loads(tmp_path: Path) -> None:
    for bad, field in [("learner.lrr=1", "learner.lrr: unknown key"), ("learner.lr=fast", "learner.lr: Input should be a valid number")]:
        start = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "arena.train", "games/spy/spy.yaml", "--set", bad, "--run-dir", str(tmp_path / "x")],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert field in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert time.time() - start < 60
        assert not (tmp_path / "x").exists()


@pytest.mark.vllm
def test_train_with_the_vllm_backend_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="vLLM is not installed")
    run = tmp_path / "vllm"
    sets = [a for item in [*TINY, "policies.learner.backend=vllm", "train.steps=2", "train.checkpoint_every=2"] for a in ("--set", item)]
    proc = subprocess.run(
        [sys.executable, "-m", "arena.train", "games/spy/spy.yaml", *sets, "--run-dir", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    # The engine got the learner's weights after step 1: its logprobs still match the learner's.
    assert rows[1]["logprob_gap"] is not None and rows[1]["logprob_gap"] < 0.2
    # train.memory.release_engine (auto): the engine gave its weights and KV cache back during each update, and
    # the sync after it loaded the new weights: the canary found the generator scoring as the learner does.
    assert all(r["memory/engine_released_mib"] > 0 and r["sync/canary_gap"] < 0.15 for r in rows), rows
    assert (run / "checkpoints" / "step_000002" / "model" / "config.json").is_file()


def test_a_step_with_no_sample_names_the_warm_start_when_replies_are_invalid() -> None:
    from arena.core.types import Episode, Turn
    from arena.loop.trainer import no_samples_message

    def episode(valid: list[bool]) -> Episode:
        turns = [Turn(index=i, seat="s", role="player", phase="bid", policy="learner", messages=[], completion="x",
                      valid=v) for i, v in enumerate(valid)]
        return Episode(game="g", episode_id="e", seed=0, turns=turns, rewards={"s": 0.0}, roles={"s": "player"})

    mostly_invalid = no_samples_message([episode([False, False, False, True])], ["bid"], "learner")
    assert "75% of the trainable policy's 4 replies were invalid" in mostly_invalid
    assert "train.warm_start" in mostly_invalid and "\n" not in mostly_invalid
    valid = no_samples_message([episode([True, True])], ["bid"], "learner")
    assert "0% of the trainable policy's 2 replies" in valid and "train.warm_start" not in valid
    assert "drop_zero_variance" in valid
    # another policy's invalid turns are not the trainable policy's
    other = episode([False, False])
    other.turns[0].policy = other.turns[1].policy = "frozen"
    assert "of the trainable policy's 0 replies" in no_samples_message([other], ["bid"], "learner")
