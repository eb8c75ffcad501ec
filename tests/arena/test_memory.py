"""glibc's mmap threshold kept fixed (arena/core/memory.py, issue #54): freed blocks go back to the system.

Each case runs in a fresh interpreter: the threshold is process-wide and only rises."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest


def glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        return False


pytestmark = pytest.mark.skipif(not glibc(), reason="glibc's malloc on Linux")

#: In a fresh process: raise glibc's dynamic threshold (a 16 MiB block mapped and freed), then allocate and
#: touch 64 blocks of 1 MiB, each followed by a 64 KiB one that stays (as a run's longer-lived tensors do), and
#: free the 64; print the MiB still held.
SCRIPT = """
import ctypes, sys
from pathlib import Path
from arena.core.memory import keep_mmap_threshold
fixed = keep_mmap_threshold() if sys.argv[1] == "fixed" else None
libc = ctypes.CDLL({libc!r})
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    row = next(r for r in Path("/proc/self/status").read_text().splitlines() if r.startswith("VmRSS:"))
    return int(row.split()[1]) // 1024
big = libc.malloc(16 << 20); ctypes.memset(big, 1, 16 << 20); libc.free(big)
start = rss()
blocks, kept = [], []
for _ in range(64):
    blocks.append(libc.malloc(1 << 20))
    kept.append(libc.malloc(64 << 10))
    ctypes.memset(blocks[-1], 1, 1 << 20)
for b in blocks:
    libc.free(b)
print(fixed, rss() - start)
"""


def held_mib(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    code = SCRIPT.format(libc=ctypes.util.find_library("c") or "libc.so.6")
    out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_stay_with_the_process_by_default() -> None:
    assert held_mib("default")[1] >= 48  # glibc's threshold rose to 16 MiB: the 1 MiB blocks came from the heap


def test_with_the_threshold_kept_they_go_back() -> None:
    fixed, held = held_mib("fixed")
    assert fixed == "True" and held <= 8


def test_a_threshold_set_in_the_environment_wins() -> None:
    env = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30)}  # the user's: every block from the heap
    fixed, held = held_mib("fixed", env)
    assert fixed == "False" and held >= 48
