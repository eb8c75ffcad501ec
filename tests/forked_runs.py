"""Real ``arena.train`` processes at a fraction of the start-up cost, for tests that start many.

A *zygote* (``python tests/forked_runs.py``) imports arena, torch and transformers once,
without running any torch op, then forks one child per run. Each child is a real
process running the real CLI entry point (``run_cli(arena.train.main)``: exit codes,
one-line errors); killing it with SIGKILL is a real kill at any moment, a checkpoint
write included. Forking skips the ~4 s of imports each fresh interpreter pays on this
machine, which is what lets the chaos tests kill a run many times within their budget.

Protocol (one run at a time): the test writes a JSON line ``{"argv": [...], "log": PATH,
"fsize": BYTES|null, "stale": BOOL}``; the zygote answers ``pid N`` when the child starts and ``rc N``
when it ends (``-9`` for SIGKILL). ``fsize`` caps the size of any file the child writes
(``RLIMIT_FSIZE``; Python ignores SIGXFSZ, so writes fail with EFBIG). ``stale`` plants the
fault the weight-sync canary must catch: ``Trainer.sync_weights`` does nothing in that child.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Zygote:
    """The test side: start runs, wait for them, kill them."""

    def __init__(self) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self._buf = b""
        self.pid: int | None = None
        assert self._line(300) == "ready", "the zygote did not start"

    def _line(self, timeout: float) -> str | None:
        """The zygote's next line, or None after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)  # type: ignore[union-attr]
            if not chunk:
                raise RuntimeError("the zygote exited")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def start(self, argv: list[str], log: Path, fsize: int | None = None, stale: bool = False) -> int:
        msg = json.dumps({"argv": argv, "log": str(log), "fsize": fsize, "stale": stale}) + "\n"
        self.proc.stdin.write(msg.encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self._line(60)
        assert line and line.startswith("pid "), line
        self.pid = int(line.split()[1])
        return self.pid

    def wait(self, timeout: float) -> int | None:
        """The run's exit code, or None if it is still running after ``timeout`` seconds."""
        line = self._line(timeout)
        if line is None:
            return None
        assert line.startswith("rc "), line
        self.pid = None
        return int(line.split()[1])

    def kill(self) -> int:
        assert self.pid is not None
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had just ended: its rc line is on the way
            pass
        rc = self.wait(60)
        assert rc is not None
        return rc

    def run(self, argv: list[str], log: Path, timeout: float = 600, fsize: int | None = None, stale: bool = False) -> int:
        self.start(argv, log, fsize, stale)
        rc = self.wait(timeout)
        assert rc is not None, f"run did not finish in {timeout} s"
        return rc

    def close(self) -> None:
        if self.pid is not None:
            self.kill()
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(30)


def _child(argv: list[str], log: str, fsize: int | None, stale: bool) -> None:
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        if fsize is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        from arena.cli import run_cli
        from arena.train import main

        if stale:  # the learner updates, the generator never hears of it
            import arena.loop.trainer

            arena.loop.trainer.Trainer.sync_weights = lambda self, force=False: None  # type: ignore[method-assign]

        try:
            run_cli(lambda: main(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def zygote() -> None:
    sys.path.insert(0, str(ROOT))
    out = os.fdopen(os.dup(1), "w")  # the protocol's channel; libraries that print go to stderr instead
    os.dup2(2, 1)
    import importlib

    # Imports only (no torch op runs before a fork): what a training run of a test game loads.
    for name in ("arena.loop.build", "arena.cli", "arena.train", "arena.loop.trainer", "arena.view.record",
                 "transformers.models.llama.modeling_llama", "transformers.models.auto.tokenization_auto",
                 "torch.utils.tensorboard", "accelerate", "deepspeed", "arena.games.spy.env"):
        try:
            importlib.import_module(name)
        except ImportError:  # optional (deepspeed); the child imports what it needs
            pass

    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            out.close()
            _child(job["argv"], job["log"], job["fsize"], job.get("stale", False))
        out.write(f"pid {pid}\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(f"rc {os.waitstatus_to_exitcode(status)}\n")
        out.flush()


if __name__ == "__main__":
    zygote()


def digit_model(src: Path, dst: Path, scale: float = 2.0) -> Path:
    """``src`` (a tiny random model) with an untied output head that gives the ten digit tokens
    nearly all the probability, so games whose actions are numbers (examples/sealed_bid.py) get
    valid, varied moves, rewards with variance and real gradients from a model that knows nothing."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src)
    tok = AutoTokenizer.from_pretrained(src)
    hidden = model.config.hidden_size
    head = torch.zeros(model.config.vocab_size, hidden)
    digits = tok.convert_tokens_to_ids([str(d) for d in range(10)])
    head[digits] = torch.randn(10, hidden, generator=torch.Generator().manual_seed(0)) * scale
    model.config.tie_word_embeddings = False
    model.lm_head = torch.nn.Linear(hidden, model.config.vocab_size, bias=False)
    with torch.no_grad():
        model.lm_head.weight.copy_(head)
    model.save_pretrained(dst)
    tok.save_pretrained(dst)
    return dst
