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


def _rss_file_mib() -> float:
    row = next(r for r in open("/proc/self/status").read().splitlines() if r.startswith("RssFile:"))
    return int(row.split()[1]) / 1024


def test_page_out_gives_back_a_mapped_checkpoints_pages_and_keeps_its_values(tmp_path) -> None:
    """The KL reference's case: weights safetensors maps from a file leave the resident set and read back
    unchanged; a tensor in anonymous memory is left alone (0 bytes advised, values kept)."""
    import torch
    from safetensors.torch import safe_open, save_file

    from arena.core.memory import PAGE, page_out

    values = torch.arange(16 << 20, dtype=torch.float32)  # 64 MiB
    save_file({"w": values, "b": torch.ones(3)}, tmp_path / "model.safetensors")
    with safe_open(tmp_path / "model.safetensors", framework="pt") as f:
        mapped = f.get_tensor("w")  # safetensors maps the file (as transformers' float32 loads do)
    resident = _rss_file_mib()
    assert float(mapped.sum()) == float(values.sum())  # touched: every page resident
    touched = _rss_file_mib()
    advised = page_out([mapped])
    after = _rss_file_mib()
    assert advised >= 64 * 2**20 - 2 * PAGE
    assert touched - after > 48, (resident, touched, after)
    assert torch.equal(mapped, values)
    anonymous = values.clone()
    assert page_out([anonymous]) == 0 and torch.equal(anonymous, values)


CAP = """
import os, sys
from arena.core.memory import cap_onednn_cache
print(cap_onednn_cache(), os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY"), os.environ.get("LRU_CACHE_CAPACITY"))
"""


@pytest.mark.parametrize(("env", "out"), [
    ({}, "True 64 64"),
    ({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "7"}, "False 7 64"),
    ({"DNNL_PRIMITIVE_CACHE_CAPACITY": "9"}, "False None 64"),
    ({"LRU_CACHE_CAPACITY": "5"}, "True 64 5"),
])
def test_onednn_cache_is_capped_unless_the_environment_says(env: dict[str, str], out: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("CACHE_CAPACITY")}
    proc = subprocess.run([sys.executable, "-c", CAP], env={**clean, **env}, capture_output=True, text=True, check=True)
    assert proc.stdout.split()[-3:] == out.split()


def test_arena_train_caps_the_cache_before_anything_runs() -> None:
    """``arena.train`` caps it first thing: a bad flag (exit 2, nothing loaded) has already set it."""
    clean = {k: v for k, v in os.environ.items() if "PRIMITIVE_CACHE_CAPACITY" not in k}
    code = ("import os, sys\nfrom arena.train import main\n"
            "try:\n    main(['--no-such-flag'])\nexcept SystemExit:\n    pass\n"
            "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'))")
    proc = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True)
    assert proc.stdout.split()[-1] == "64", (proc.stdout, proc.stderr[-500:])


def test_page_out_keeps_a_write_into_the_mapping(tmp_path) -> None:
    """A mapped page something wrote into is the process's own copy: giving it back must not revert it to the
    file's bytes (so it goes through MADV_PAGEOUT, never MADV_DONTNEED); the untouched pages come back as they
    were."""
    import torch
    from safetensors.torch import safe_open, save_file

    from arena.core.memory import page_out

    values = torch.arange(4 << 20, dtype=torch.float32)  # 16 MiB
    save_file({"w": values}, tmp_path / "model.safetensors")
    with safe_open(tmp_path / "model.safetensors", framework="pt") as f:
        mapped = f.get_tensor("w")
    assert float(mapped.sum()) == float(values.sum())
    mapped[1 << 20] = -1.0  # copied on write: this page is the process's now
    assert page_out([mapped]) > 0
    assert float(mapped[1 << 20]) == -1.0
    expected = values.clone()
    expected[1 << 20] = -1.0
    assert torch.equal(mapped, expected)
