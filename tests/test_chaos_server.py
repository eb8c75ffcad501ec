"""Fault test (``chaos``, part of ``make test``): a policy server behind the ``openai`` backend
that is not there stops ``arena.train`` with one line, exit code 1 and no checkpoint.

Real parts only: a real ``arena.train`` process (forked from the zygote of
tests/forked_runs.py) training examples/sealed_bid.py, where ``bidder_0`` is the trainable
tiny digit model of tests/test_chaos.py on hf and every other seat is an ``openai`` policy
whose URL is a free localhost port (nothing listens: connections are refused, as after a
server crash). The same run against a real ``vllm serve`` killed mid-rollout, then resumed
once the server is back (issue #16), is written but not yet run (the shared CPU lock was
held for the whole session); it is not part of this file until it has passed.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from arena.checkpoint import TMP_PREFIX, list_checkpoints
from forked_runs import digit_model
from test_league import tiny_model  # noqa: F401  (the fixture: a 2-layer random model, SmolLM2's tokenizer)

pytestmark = pytest.mark.chaos

STEPS = 3
RETRIES = 2  # the openai policy's retries: 3 attempts, 0.5 + 1.0 s of backoff between them


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def digits(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return digit_model(tiny_model, tmp_path_factory.mktemp("digits") / "model")


def write_config(path: Path, learner: Path, url: str) -> Path:
    cfg = {
        "game": {"name": "examples.sealed_bid:SealedBidGame", "max_bid": 10000},
        "policies": {
            "learner": {"model": str(learner), "trainable": True, "backend": "hf",
                        "sampling": {"max_new_tokens": 4}},
            "server": {"model": "smollm2-135m", "backend": "openai", "base_url": url, "retries": RETRIES,
                       "timeout_s": 60, "sampling": {"max_new_tokens": 4}},
        },
        "seats": {"bidder_0": "learner", "*": "server"},
        "runner": {"num_envs": 2, "progress": False},
        "learner": {"lr": 1e-3},
        "train": {"steps": STEPS, "games_per_step": 2, "checkpoint_every": 1, "keep_checkpoints": 2, "plot": False},
    }
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.exists() else []


def stray(run: Path) -> list[str]:
    root = run / "checkpoints"
    return [p.name for p in root.iterdir() if p.name.startswith(TMP_PREFIX)] if root.is_dir() else []


def one_error_line(err: str) -> str:
    """The run's only ``error:`` line, which is its last, with no traceback before it."""
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and err.rstrip().splitlines()[-1] == lines[0], err[-3000:]
    return lines[0]


def test_no_server_from_the_start_stops_with_one_line(digits: Path, tmp_path: Path, zygote):
    """No server at all (a free port): step 1's first request fails after its retries; one line, no checkpoint."""
    url = f"http://127.0.0.1:{_free_port()}"
    run, log = tmp_path / "run", tmp_path / "run.log"
    start = time.monotonic()
    rc = zygote.run([str(write_config(tmp_path / "run.yaml", digits, url)), "--run-dir", str(run)], log, timeout=300)
    err = log.read_text()
    assert rc == 1, err[-3000:]
    line = one_error_line(err)
    assert f"policy 'server': cannot reach {url}/v1/completions after {RETRIES + 1} attempts" in line, line
    assert line.endswith("No checkpoint yet: once the server answers again, run the same command again."), line
    assert not list_checkpoints(run) and not stray(run) and steps(run) == []
    assert time.monotonic() - start < 120
