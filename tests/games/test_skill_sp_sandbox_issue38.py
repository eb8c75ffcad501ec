"""Issue 38, the sandbox's findings, each tried for real against the real bubblewrap and shown to fail.

1. a run that clears its parent-death signal and hides its run token outlives nothing;
2. host-wide budgets (aio, inotify, leases, POSIX timers, death signal, dumpability, socketpair);
3. the /tmp inode cap holds when the main thread exits.

Findings 4 and 5 (the judge's verdict, deep arguments) are in test_skill_sp_sandbox_judge.py.

Every test runs under an alarm: a hang fails it instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.games.skill_sp import seccomp
from arena.games.skill_sp.loader import examples_jobs, load_library
from arena.games.skill_sp.sandbox import Limits, Sandbox, SandboxPool, Status, no_fork_filter
from test_skill_sp_sandbox import start_sandbox

LIMITS = Limits(wall_s=3.0, cpu_s=2, memory_mb=256, output_bytes=1 << 16, file_bytes=1 << 20, tmp_bytes=8 << 20)
HANG_S = 120  # no test here comes near this; past it the test fails instead of hanging


@pytest.fixture(autouse=True)
def hang_guard() -> Iterator[None]:
    def fail(*_: object) -> None:
        raise TimeoutError(f"the test hung for {HANG_S} s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return start_sandbox(LIMITS)


@pytest.fixture(scope="module")
def unguarded() -> Iterator[Sandbox]:
    """A sandbox as the issue found it: prctl unfiltered, so the code can clear its death signal.

    Finding 1's fix (the parent's pidfd) must hold on its own, not only because finding 2's
    filter now refuses PR_SET_PDEATHSIG."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delitem(seccomp._ARGUMENTS, "prctl")
        box = start_sandbox(LIMITS)
    assert box._filter != no_fork_filter()  # built without the prctl rule
    yield box


# ---------------------------------------------------------------- finding 1: a run outlives its sandbox
class RunProcesses:
    """Finds, from the host and without the run's help, the interpreter of each run this test process starts.

    The interpreter is pid 1 of its own pid namespace and a child of ``bwrap``, whose parent is
    this test process; its command line and name are the code's to change, so neither is used.
    Each one found is held by a pidfd of the test's own (no pid reuse can confuse the check).
    """

    def __init__(self) -> None:
        self.pidfds: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scan, daemon=True)

    def __enter__(self) -> RunProcesses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for fd in self.pidfds.values():  # whatever survived the sandbox: the test cleans up after it
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            os.close(fd)

    def _scan(self) -> None:
        me = str(os.getpid())
        while not self._stop.is_set():
            for pid in filter(str.isdigit, os.listdir("/proc")):
                if int(pid) in self.pidfds:
                    continue
                try:
                    status = dict(
                        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
                    )
                    if status["NSpid"].split()[-1] != "1" or len(status["NSpid"].split()) < 2:
                        continue
                    parent = Path(f"/proc/{status['PPid'].strip()}/status").read_text()
                    if f"\nPPid:\t{me}\n" not in parent:
                        continue
                    fd = os.pidfd_open(int(pid))
                except (OSError, KeyError):
                    continue
                self.pidfds[int(pid)] = fd
            time.sleep(0.005)

    def alive(self, within_s: float = 2.0) -> list[int]:
        """The runs' interpreters still alive ``within_s`` after the runs returned (a pidfd polls readable at exit)."""
        deadline, alive = time.monotonic() + within_s, list(self.pidfds)
        while alive and time.monotonic() < deadline:
            alive = [pid for pid, fd in self.pidfds.items() if not exited(fd)]
            time.sleep(0.02)
        return alive


def exited(pidfd: int) -> bool:
    """A pidfd polls readable once its process has exited."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


# The attack of finding 1: no death signal, no run token in /proc/PID/cmdline, then sleep past the wall.
OUTLIVE = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
cleared = libc.prctl(1, 0, 0, 0, 0) == 0            # PR_SET_PDEATHSIG, 0
print("cleared" if cleared else "refused", flush=True)
fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
arg_start, arg_end = int(fields[45]), int(fields[46])  # fields 48 and 49: where argv lives
ctypes.memset(arg_start, 0, arg_end - arg_start)       # the run token is gone from /proc/PID/cmdline
assert b"_driver" not in open("/proc/self/cmdline", "rb").read()
time.sleep(60)
"""


@pytest.mark.parametrize("guarded", [False, True], ids=["prctl_unfiltered", "prctl_filtered"])
def test_a_run_that_clears_its_death_signal_is_killed_at_the_wall(sandbox, unguarded, guarded):
    box = sandbox if guarded else unguarded
    with RunProcesses() as runs:
        r = box.run(OUTLIVE)
        assert r.status is Status.TIMEOUT and r.limit == "wall", r
        assert r.output == ("refused\n" if guarded else "cleared\n"), r  # unfiltered, the attack really ran
        assert len(runs.pidfds) == 1, runs.pidfds  # the watcher saw the interpreter
        assert runs.alive() == []


@pytest.mark.parametrize("guarded", [False, True], ids=["prctl_unfiltered", "prctl_filtered"])
def test_a_validator_in_call_mode_that_clears_its_death_signal_is_killed(sandbox, unguarded, guarded):
    box = sandbox if guarded else unguarded
    validator = "def validate(contract):\n" + "\n".join("    " + line for line in OUTLIVE.splitlines()) + "\n    return []\n"
    with RunProcesses() as runs:
        r = box.call("validators", "validate", {"contract": {}}, {"validators.py": validator})
        assert r.status is Status.TIMEOUT and r.limit == "wall", r
        assert r.stderr == ("refused\n" if guarded else "cleared\n"), r  # a call's prints go to stderr
        assert len(runs.pidfds) == 1, runs.pidfds
        assert runs.alive() == []



def test_a_run_the_parent_cannot_hold_never_runs(sandbox, monkeypatch):
    """Fail closed: if the parent cannot watch the run's /tmp (or hold its process), the code gets no secret
    and the driver runs nothing; the result says why."""
    import arena.games.skill_sp.sandbox as sandbox_module

    monkeypatch.setattr(sandbox_module._Child, "watch_tmp", lambda self, limits: "refused for the test")
    with RunProcesses() as runs:
        r = sandbox.run("print('ran')\nimport time\ntime.sleep(60)")
        assert r.status is Status.ERROR and r.output == "" and "refused for the test" in r.reason, r
        assert runs.alive() == []

# ---------------------------------------------------------------- finding 2: host-wide budgets
BUDGETS = """
import ctypes, errno, fcntl, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return [r, ctypes.get_errno()]
def err(call):
    try:
        call()
        return "done"
    except OSError as e:
        return e.errno
out = {}
ctx, params = ctypes.c_ulong(0), ctypes.create_string_buffer(120)
out["io_setup"] = sc(NR["io_setup"], 65536, ctypes.addressof(ctx))          # 64k events of fs.aio-max-nr
out["io_uring_setup"] = sc(NR["io_uring_setup"], 8, ctypes.addressof(params))
out["inotify_init1"] = sc(NR["inotify_init1"], 0)
out["inotify_add_watch"] = sc(NR["inotify_add_watch"], 0, 0, 0)
if NR.get("inotify_init"):
    out["inotify_init"] = sc(NR["inotify_init"])
timer = ctypes.c_void_p(0)
ctypes.set_errno(0)
out["timer_create"] = [libc.timer_create(1, None, ctypes.byref(timer)), ctypes.get_errno()]  # CLOCK_MONOTONIC
fd = os.open("/tmp/leased", os.O_RDWR | os.O_CREAT)
out["F_SETLEASE"] = err(lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK))
out["F_NOTIFY"] = err(lambda: fcntl.fcntl(os.open("/tmp", os.O_RDONLY), fcntl.F_NOTIFY, fcntl.DN_CREATE))
out["F_GETFL"] = err(lambda: fcntl.fcntl(fd, fcntl.F_GETFL))                # other fcntl calls still work
for name, option in (("PR_SET_PDEATHSIG", 1), ("PR_SET_DUMPABLE", 4)):
    ctypes.set_errno(0)
    out[name] = [libc.prctl(option, 0, 0, 0, 0), ctypes.get_errno()]
out["PR_GET_DUMPABLE"] = libc.prctl(3, 0, 0, 0, 0)                          # still dumpable, still readable
out["PR_SET_NAME"] = libc.prctl(15, b"renamed", 0, 0, 0)
out["socketpair_netlink"] = err(lambda: socket.socketpair(socket.AF_NETLINK, socket.SOCK_DGRAM))
out["socketpair_inet"] = err(lambda: socket.socketpair(socket.AF_INET, socket.SOCK_STREAM))
out["socketpair_unix"] = err(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
print(json.dumps(out))
"""


def test_host_wide_budgets_are_refused_inside(sandbox):
    column = 0 if os.uname().machine == "x86_64" else 1
    names = ("io_setup", "io_uring_setup", "inotify_init1", "inotify_add_watch", "inotify_init")
    numbers = {n: seccomp._DENIED[n][column] for n in names}
    r = sandbox.run(f"NR = {numbers!r}\n" + BUDGETS)
    assert r.ok, r
    out = json.loads(r.output)
    for name in ("io_setup", "io_uring_setup", "inotify_init1", "inotify_add_watch", "inotify_init", "timer_create",
                 "PR_SET_PDEATHSIG", "PR_SET_DUMPABLE"):  # fmt: skip
        if name in out:
            assert out[name] == [-1, 1], (name, out[name])  # EPERM: the filter, not the kernel, answered
    assert out["F_SETLEASE"] == out["F_NOTIFY"] == 1, out
    assert out["socketpair_netlink"] == out["socketpair_inet"] == 97, out  # EAFNOSUPPORT (the kernel: EOPNOTSUPP)
    assert out["F_GETFL"] == out["socketpair_unix"] == "done" and out["PR_GET_DUMPABLE"] == 1 and out["PR_SET_NAME"] == 0


def test_ordinary_validators_still_run(sandbox):
    """The narrower filter still runs every bundled validator's examples, and the standard library they use."""
    jobs = [job for pkg in load_library().values() for job in examples_jobs(pkg)]
    roomy = LIMITS.model_copy(update={"wall_s": 30.0, "cpu_s": 10})
    with SandboxPool(Sandbox(roomy), workers=2) as pool:
        results = pool.map(jobs)
    assert all(r.ok and r.value == [] for r in results), [r for r in results if not (r.ok and r.value == [])][:2]
    code = ("import json, re, math, datetime, statistics, fractions, itertools, collections, threading, time\n"
            "t = threading.Timer(0.01, print, args=('timer',))\nt.start()\nt.join()\ntime.sleep(0.01)\n"
            "print(json.dumps([re.sub('a', 'b', 'aa'), math.isqrt(17), statistics.mean([1, 2]), "
            "str(fractions.Fraction(1, 3)), datetime.date(2020, 1, 1).isoformat()]))")  # fmt: skip
    r = sandbox.run(code)
    assert r.ok and r.output == 'timer\n["bb", 4, 1.5, "1/3", "2020-01-01"]\n', r


def bpf(prog: bytes, nr: int, arch: int, *args: int) -> int:
    """The filter's verdict on one ``seccomp_data`` (nr, arch, args), by a tiny classic-BPF interpreter."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:
            return k
        else:
            pc += jt if {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code] else jf
        pc += 1


@pytest.mark.parametrize(("machine", "arch", "column"), [("x86_64", 0xC000003E, 0), ("aarch64", 0xC00000B7, 1)])
def test_argument_rules_logic(machine, arch, column):
    prog = no_fork_filter(machine)
    allow, eperm, eafnosupport = 0x7FFF0000, 0x50000 | 1, 0x50000 | 97
    fcntl_nr, prctl_nr, pair_nr = (72, 157, 53) if machine == "x86_64" else (25, 167, 199)
    assert bpf(prog, fcntl_nr, arch, 3, 1024) == bpf(prog, fcntl_nr, arch, 3, 1026) == eperm  # F_SETLEASE, F_NOTIFY
    assert bpf(prog, fcntl_nr, arch, 3, 3) == allow  # F_GETFL
    assert bpf(prog, fcntl_nr, arch, 1024, 3) == allow  # the rule reads the command, not the descriptor
    assert bpf(prog, prctl_nr, arch, 1) == bpf(prog, prctl_nr, arch, 4) == eperm  # PDEATHSIG, DUMPABLE
    assert bpf(prog, prctl_nr, arch, 38) == bpf(prog, prctl_nr, arch, 22) == allow  # the driver's no_new_privs, seccomp
    assert bpf(prog, pair_nr, arch, 1) == allow and bpf(prog, pair_nr, arch, 16) == bpf(prog, pair_nr, arch, 2) == eafnosupport
    for name in ("io_setup", "inotify_init1", "inotify_add_watch", "timer_create", "io_uring_setup"):
        assert bpf(prog, seccomp._DENIED[name][column], arch) == eperm, name
    # issue 54: buffers stay at their default sizes; huge pages stay off once the driver turned them off
    setsockopt_nr = 54 if machine == "x86_64" else 208
    assert bpf(prog, fcntl_nr, arch, 3, 1031) == eperm  # F_SETPIPE_SZ
    assert all(bpf(prog, setsockopt_nr, arch, 3, 1, opt) == eperm for opt in (7, 8, 32, 33))  # SO_SNDBUF...
    assert bpf(prog, setsockopt_nr, arch, 3, 1, 2) == allow  # SO_REUSEADDR
    noexec = seccomp.no_exec_filter(machine)
    assert bpf(noexec, prctl_nr, arch, 41) == eperm and bpf(noexec, prctl_nr, arch, 42) == allow  # SET/GET_THP_DISABLE


# ---------------------------------------------------------------- finding 3: the /tmp inode cap, main thread gone
# The main thread leaves (pthread_exit): the group leader is a zombie, /proc/PID/root of it cannot be
# read, and the parent used to treat its /tmp as unknown. A second thread floods /tmp with empty files.
LEADERLESS_FLOOD = """
import ctypes, os, threading
def flood():
    i = 0
    while True:
        os.close(os.open(f"/tmp/{i}", os.O_CREAT | os.O_WRONLY))
        i += 1
threading.Thread(target=flood).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def test_inode_cap_holds_when_the_main_thread_exits(sandbox):
    r = sandbox.run(LEADERLESS_FLOOD)
    assert r.status is Status.KILLED and r.limit == "file" and "files in /tmp" in r.reason, r
    threads = sandbox.run("import ctypes, threading, time\n"
                          "def spawn():\n    threading.stack_size(32768)\n    ev = threading.Event()\n"
                          "    while True:\n        threading.Thread(target=ev.wait).start()\n"
                          "threading.Thread(target=spawn).start()\nctypes.CDLL(None).pthread_exit(None)")  # fmt: skip
    assert threads.status is Status.KILLED and threads.limit == "processes", threads
