"""python -m arena.train end to end on the built-in model (slow): resume after SIGKILL is exact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.trainer import TIMING_KEYS

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "game.n_players=3", "game.task=math", "policies.learner.sampling.max_new_tokens=8", "runner.num_envs=2",
    "runner.progress=false", "train.games_per_step=2", "train.steps=4", "train.checkpoint_every=1",
    "train.keep_checkpoints=5", "train.plot=false", "learner.beta=0.001", "learner.lr=1e-4",
]

pytestmark = pytest.mark.slow


def _cmd(run_dir: Path, *extra: str) -> list[str]:
    sets = [arg for item in TINY for arg in ("--set", item)]
    return [sys.executable, "-m", "arena.train", "games/spy/spy.yaml", *sets, "--run-dir", str(run_dir), *extra]


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    subprocess.run(_cmd(straight), cwd=ROOT, check=True, capture_output=True, timeout=900)
    expected = _metrics(straight)
    assert [r["step"] for r in expected] == [1, 2, 3, 4]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(killed), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (killed / "checkpoints" / "step_000002").exists():
        assert proc.poll() is None and time.time() < deadline, "run ended before its second checkpoint"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for ckpt in (killed / "checkpoints").glob("step_*"):
        assert (ckpt / "state.json").is_file() and (ckpt / "model" / "config.json").is_file()

    subprocess.run(_cmd(killed, "--resume", str(killed)), cwd=ROOT, check=True, capture_output=True, timeout=900)
    resumed = _metrics(killed)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    for want, got in zip(expected[2:], resumed[2:], strict=True):
        assert got.keys() == want.keys()
        for key in want:
            if isinstance(want[key], float):
                assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-7), key
            else:
                assert got[key] == want[key], key


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
    assert (run / "checkpoints" / "step_000002" / "model" / "config.json").is_file()
