"""Issue 54, the sandbox's findings, each tried for real against the real bubblewrap and shown to fail:

1. memory pinned past munmap through ``vmsplice`` of a transparent huge page (and the other
   ways a pipe holds pages by reference: splice, tee, sendfile);
2. page tables, which RLIMIT_AS does not count;
3. pipe and socket buffers grown to ``pipe-max-size`` and ``2 x wmem_max``;
4. real-time signals queued to itself, which the host's root shares one budget with.

The split judge's escape (a validator choosing which answers count) is in
test_skill_sp_sandbox_judge.py, the static check's routes in test_skill_sp_sandbox_static.py. Every test runs under issue 38's hang guard.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from arena.games.skill_sp.sandbox import Limits, Sandbox, Status
from test_skill_sp_sandbox import start_sandbox
from test_skill_sp_sandbox_issue38 import hang_guard  # noqa: F401 - autouse fixture

LIMITS = Limits(wall_s=10.0, cpu_s=5, memory_mb=256, output_bytes=1 << 16, file_bytes=1 << 20, tmp_bytes=8 << 20)
MIB = 1 << 20


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return start_sandbox(LIMITS)


def report(result) -> dict:
    assert result.status is Status.OK, result
    return json.loads(result.output.strip().splitlines()[-1])


LIBC = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
FAILED = ctypes.c_void_p(-1).value
"""

# ---------------------------------------------------------------- 1: pages pinned in a pipe past munmap
# Touch a 2 MiB huge page, vmsplice 4 KiB of it into a pipe, unmap it: the pipe holds the whole folio.
# Each piece counts what it really pins: 2 MiB when the region was a huge page, else 4 KiB.
PIN = LIBC + """
class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def huge_kb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
HUGE = 2 << 20
out = {"pinned_mb": 0.0, "huge_pages": 0, "errno": 0, "thp_off": libc.prctl(42, 0, 0, 0, 0),
       "thp_back_on": libc.prctl(41, 0, 0, 0, 0)}
pipes, full, pinned = [], True, 0
while pinned < TARGET and len(pipes) < 40:
    if full:
        pipes.append(os.pipe())
        full = False
    raw = libc.mmap(None, 2 * HUGE, 3, 0x22, -1, 0)           # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    addr = (raw + HUGE - 1) & ~(HUGE - 1)
    libc.madvise(addr, HUGE, 14)                                 # MADV_HUGEPAGE
    ctypes.memset(addr, 1, HUGE)
    huge = huge_kb() >= 2048
    iov = IOV(addr, 4096)
    ctypes.set_errno(0)
    n = libc.vmsplice(pipes[-1][1], ctypes.byref(iov), 1, 2)   # SPLICE_F_NONBLOCK
    errno = ctypes.get_errno()
    libc.munmap(raw, 2 * HUGE)
    if n < 0 and errno == 11:
        full = True
        continue
    if n < 0:
        out["errno"] = errno
        break
    pinned += HUGE if huge else 4096
    out["huge_pages"] += huge
out["pinned_mb"] = pinned / (1 << 20)
src = os.open("/tmp/f", os.O_RDWR | os.O_CREAT)
os.write(src, b"x" * 65536)
r, w = os.pipe()
r2, w2 = os.pipe()
def errno_of(call):
    try:
        call()
        return 0
    except OSError as e:
        return e.errno
out["splice"] = errno_of(lambda: os.splice(src, w, 4096, offset_src=0))
out["sendfile"] = errno_of(lambda: os.sendfile(w, src, 0, 4096))
os.write(w, b"y")
ctypes.set_errno(0)
out["tee"] = 0 if libc.tee(r, w2, 1, 0) >= 0 else ctypes.get_errno()
print(json.dumps(out))
"""


def test_pages_held_by_a_pipe_past_munmap_stay_within_the_memory_limit(sandbox):
    """The attack aims at three times the limit; before the fix it held all of it (huge pages on a host whose THP
    setting is ``madvise`` or ``always``), with 4 KiB of address space each."""
    out = report(sandbox.run(PIN.replace("TARGET", str(3 * LIMITS.memory_mb * MIB))))
    assert out["pinned_mb"] <= LIMITS.memory_mb, out
    assert out["errno"] == 1 and out["pinned_mb"] == 0, out  # vmsplice: EPERM from the filter
    assert out["thp_off"] == 1 and out["thp_back_on"] == -1, out  # huge pages off, and they stay off
    assert out["splice"] == out["sendfile"] == out["tee"] == 1, out  # the other ways into a pipe by reference


# ---------------------------------------------------------------- 2: page tables
# One 4 KiB page per GiB: each costs a page-table page and a page-middle-directory page (8 KiB) for 4 KiB of
# RLIMIT_AS. Before the fix, 61 737 of them held 483 MiB of page tables under a 256 MiB limit.
PAGE_TABLES = LIBC + """
import threading, time
def spread():
    base, n = 0x100000000000, 0
    while n < 100_000:
        a = libc.mmap(base + (n << 30), 4096, 3, 0x22 | 0x100000, -1, 0)   # MAP_FIXED_NOREPLACE
        if a in (None, FAILED):
            break
        ctypes.memset(a, 1, 1)
        n += 1
    status = open("/proc/self/task/%d/status" % threading.get_native_id()).read()
    print(json.dumps({"mappings": n, "vm_pte_kb": int(status.split("VmPTE:")[1].split()[0])}), flush=True)
    time.sleep(1)
"""


@pytest.mark.parametrize("leader", ["main_thread", "main_thread_gone"])
def test_page_tables_count_against_the_memory_limit(sandbox, leader):
    """Killed as a memory failure once the page tables pass 1/16 of ``memory_mb``, also when the main
    thread has left (its ``/proc/PID/status`` then shows no memory at all)."""
    tail = "spread()\n" if leader == "main_thread" else "threading.Thread(target=spread).start()\nlibc.pthread_exit(None)\n"
    r = sandbox.run(PAGE_TABLES + tail)
    assert r.status is Status.KILLED and r.limit == "memory" and "page tables" in r.reason, r


# ---------------------------------------------------------------- 3: pipe and socket buffers
# Socketpairs and pipes until the descriptors run out, each grown to the most the kernel allows and filled,
# the full ones parked in flight (SCM_RIGHTS) to free descriptors for more. Before the fix: 486 MiB of socket
# buffers (SO_SNDBUF up to 2 x wmem_max) and 31 MiB of pipes (F_SETPIPE_SZ to pipe-max-size).
BUFFERS = """
import array, fcntl, json, os, socket
out = {"queued": 0, "setsockopt": 0, "setpipe": 0, "in_flight": 0}
holder = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
chunk = b"x" * 65536
def fill(fd):
    n = 0
    while True:
        try:
            n += os.write(fd, chunk)
        except OSError:
            return n
def park(fds):
    try:
        holder[0].sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    except OSError:
        return
    for fd in fds:
        os.close(fd)
    out["in_flight"] += len(fds)
while True:
    try:
        a, b = socket.socketpair()
        r, w = os.pipe()
    except OSError:
        break
    for s in (a, b):
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                s.setsockopt(socket.SOL_SOCKET, option, 1 << 30)
            except OSError as e:
                out["setsockopt"] = e.errno
        s.setblocking(False)
    try:
        fcntl.fcntl(w, 1031, 1 << 20)                                  # F_SETPIPE_SZ
    except OSError as e:
        out["setpipe"] = e.errno
    os.set_blocking(w, False)
    out["queued"] += fill(a.fileno()) + fill(b.fileno()) + fill(w)
    park([a.detach(), b.detach(), r, w])
print(json.dumps(out))
"""


def test_pipe_and_socket_buffers_stay_at_their_defaults(sandbox):
    """What the run can queue is bounded by its descriptors (open and in flight) times the default buffers:
    ``net.core.wmem_default`` a socket (plus one message past it), 64 KiB a pipe."""
    out = report(sandbox.run(BUFFERS))
    wmem_default = int(Path("/proc/sys/net/core/wmem_default").read_text())
    descriptors = 2 * LIMITS.open_files  # open, and as many again in flight
    bound = descriptors * (wmem_default + 65536)
    assert 0 < out["queued"] <= bound, (out, bound)
    assert out["setsockopt"] == out["setpipe"] == 1, out  # EPERM from the filter
    assert out["in_flight"] > 0, out  # the attack really parked descriptors


# ---------------------------------------------------------------- 4: real-time signals
SIGNALS = """
import json, signal, threading, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
queued = 0
while queued < 5000:
    try:
        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
    except OSError:
        break
    queued += 1
print(json.dumps({"queued": queued}), flush=True)
time.sleep(1.5)
"""


SIGPENDING = 64  # the run's RLIMIT_SIGPENDING (arena/games/skill_sp/_driver.py)


def pending_signals() -> int:
    """Signals queued for this process's user, counted at the host's level (``SigQ`` of /proc/self/status):
    the sandbox's user namespace counts into the same number."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("SigQ:"):
            return int(line.split()[1].split("/")[0])
    raise AssertionError("no SigQ in /proc/self/status")


def test_queued_signals_stay_within_a_small_budget(sandbox):
    """Before the fix, 5 000 queued signals raised the host root's count by 5 000 (the run's uid is the host's
    root): with 96 367 of them, the host's own timer_create failed."""
    base, peak, stop = pending_signals(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], pending_signals())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out = report(sandbox.run(SIGNALS))
    finally:
        stop.set()
        sampler.join()
    assert peak[0] - base <= SIGPENDING + 16, (peak[0], base, out)  # 16: the host's own, now and then
    assert out["queued"] == SIGPENDING, out
