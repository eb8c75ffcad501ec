"""The served policy's weights folder in /dev/shm (arena/policies/openai.py): removed at close, when the policy
is collected or the interpreter exits without closing it, and, for a run that was killed, by the next run that
makes one (``sweep_weights_folders``)."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from arena.policies.openai import WEIGHTS_PREFIX, OpenAIPolicy, sweep_weights_folders


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def folder(parent: Path, pid: int, age_s: float) -> Path:
    d = parent / f"{WEIGHTS_PREFIX}{pid}-abc"
    d.mkdir()
    (d / "weights_000001.safetensors").write_bytes(b"x" * 1000)
    then = time.time() - age_s
    for p in (d / "weights_000001.safetensors", d):
        os.utime(p, (then, then))
    return d


def test_a_dead_runs_idle_folder_is_swept_and_live_recent_or_foreign_ones_stay(tmp_path: Path, capsys) -> None:
    dead = dead_pid()
    gone = folder(tmp_path, dead, age_s=3600)
    recent = tmp_path / f"{WEIGHTS_PREFIX}{dead}-recent"
    recent.mkdir()
    (recent / "w.safetensors").write_bytes(b"y")  # the dead pid, but written a moment ago
    live = folder(tmp_path, os.getppid(), age_s=3600)  # our parent: alive
    own = folder(tmp_path, os.getpid(), age_s=3600)
    no_pid = tmp_path / f"{WEIGHTS_PREFIX}x1y2z3"  # an older release's name
    no_pid.mkdir()
    other = tmp_path / "unrelated-123-abc"
    other.mkdir()
    assert sweep_weights_folders(tmp_path) == [gone]
    assert not gone.exists() and all(p.exists() for p in (recent, live, own, no_pid, other))
    assert "removed 1 folder(s)" in capsys.readouterr().err
    assert sweep_weights_folders(tmp_path, stale_after_s=0.0) == [recent]
    assert sweep_weights_folders(tmp_path) == [] and capsys.readouterr().err.count("removed") == 1


def test_a_policy_names_its_folder_with_its_pid_and_removes_it_at_close_or_collection() -> None:
    a = OpenAIPolicy("http://127.0.0.1:9", "m", api="chat", weights_dir="")
    path = a._weights_dir
    assert path is not None and path.is_dir() and path.name.startswith(f"{WEIGHTS_PREFIX}{os.getpid()}-")
    a.close()
    assert not path.exists()
    a.close()  # twice is fine
    b = OpenAIPolicy("http://127.0.0.1:9", "m", api="chat", weights_dir="")
    path = b._weights_dir
    del b
    gc.collect()
    assert path is not None and not path.exists()


def run_without_close(exit: str) -> Path:
    code = ("import os, sys\nfrom arena.policies.openai import OpenAIPolicy\n"
            "p = OpenAIPolicy('http://127.0.0.1:9', 'm', api='chat', weights_dir='')\n"
            f"print(p._weights_dir, flush=True)\n{exit}\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return Path(proc.stdout.strip())


def test_an_exit_without_close_removes_the_folder() -> None:
    assert not run_without_close("sys.exit(0)").exists()
    assert not run_without_close("raise RuntimeError('a crash')").exists()


def test_a_killed_process_leaves_its_folder_and_the_next_policy_sweeps_it() -> None:
    left = run_without_close("os._exit(0)")  # no close, no atexit: as a kill would end it
    try:
        assert left.is_dir()
        then = time.time() - 3600
        os.utime(left, (then, then))
        p = OpenAIPolicy("http://127.0.0.1:9", "m", api="chat", weights_dir="")
        p.close()
        assert not left.exists()
    finally:
        shutil.rmtree(left, ignore_errors=True)
