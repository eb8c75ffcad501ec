"""Issue 25, the escapes: the parent's environment, memory outside the limit (/dev, shared memory, ptrace, and
the other doors of that class: kernel buffers, inodes, threads), each tried for real and shown to fail.

Every attack runs real code under the real bubblewrap; the host is checked for side
effects (files, processes, memory, environment) where the attack aims at it. The
weaknesses are in test_skill_sp_sandbox_weaknesses.py, which shares these helpers.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from pathlib import Path

import pytest

from arena.games.skill_sp.sandbox import _DENIED, Limits, Sandbox, Status
from test_skill_sp_sandbox import leftovers, start_sandbox

LIMITS = Limits(wall_s=10.0, cpu_s=2, memory_mb=256, output_bytes=1 << 16, file_bytes=1 << 20, tmp_bytes=8 << 20)
MIB = 1 << 20
COLUMN = 0 if os.uname().machine == "x86_64" else 1
# Attack code preamble: raw syscalls through libc, returning (result, errno).
LIBC = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()
"""


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return start_sandbox(LIMITS)




def shmem_kb() -> int:
    """The host's shared memory (tmpfs, SysV and POSIX shm all count here)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    raise AssertionError("no Shmem in /proc/meminfo")


class PeakShmem:
    """Samples the host's Shmem while an attack runs; ``growth_mb`` is the largest rise seen."""

    def __enter__(self) -> PeakShmem:
        self.base, self.peak, self._stop = shmem_kb(), 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, shmem_kb())
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 1024


def report(result) -> dict:
    """The attack's own JSON summary: the last line of its output."""
    assert result.status is Status.OK, result
    assert leftovers(result.run_id) == []
    return json.loads(result.output.strip().splitlines()[-1])


# ---------------------------------------------------------------- escape 1: the parent's environment
def test_parent_environment_is_not_readable(sandbox, monkeypatch):
    planted = "arena-planted-" + secrets.token_hex(8)
    monkeypatch.setenv("ARENA_TEST_SECRET", planted)
    code = """
import json, os
seen, opened = [], []
paths = ["/proc/1/environ", "/proc/self/environ", f"/proc/{os.getppid()}/environ", "/proc/thread-self/environ"]
paths += [f"/proc/{p}/environ" for p in os.listdir("/proc") if p.isdigit()]
paths += [f"/proc/{p}/cmdline" for p in os.listdir("/proc") if p.isdigit()]
for p in paths:
    try:
        with open(p, "rb") as f:
            seen.append(f.read().decode("latin-1"))
        opened.append(p)
    except OSError:
        pass
seen.append(json.dumps(dict(os.environ)))
print(json.dumps({"opened": opened, "seen": seen, "pid": os.getpid(), "ppid": os.getppid()}))
"""
    found_on_host: list[int] = []

    def watch_host() -> None:  # the launcher's processes on the host, while a run sleeps
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for pid in os.listdir("/proc"):
                try:
                    if pid.isdigit() and b"_driver.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        if planted.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                            found_on_host.append(int(pid))
                except OSError:
                    continue
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_host)
    watcher.start()
    sleeper = sandbox.run("import time\ntime.sleep(2)")
    watcher.join()
    assert sleeper.ok and found_on_host == []  # neither bwrap nor the sandboxed python carries it
    r = sandbox.run(code)
    out = report(r)
    assert "/proc/1/environ" in out["opened"] and "/proc/self/environ" in out["opened"]  # the attack really read
    assert out["pid"] == 1  # no launcher process inside the pid namespace whose memory or environ could be read
    assert planted not in r.output + r.stderr
    assert all("ARENA_TEST_SECRET" not in text for text in out["seen"])
    assert os.environ["ARENA_TEST_SECRET"] == planted  # the host's own environment is untouched


# ---------------------------------------------------------------- escape 2: memory through /dev (and every mount)
def test_dev_and_every_writable_mount_are_capped(sandbox):
    code = """
import json, os
chunk = b"x" * (1 << 20)
written = {}
for path in ["/dev/fill", "/dev/shm/fill", "/dev/mqueue/fill", "/fill", "/box/fill", "/usr/fill", "/proc/fill", "/tmp/fill"]:
    n = 0
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError:
        pass
    for i in range(300):
        try:
            with open(f"{path}{i}", "wb") as f:
                n += f.write(chunk)
        except OSError:
            break
    written[path] = n
rw = [line.split()[1:4] for line in open("/proc/self/mounts") if "rw" in line.split()[3].split(",")]
print(json.dumps({"written": written, "dev": sorted(os.listdir("/dev")), "rw_mounts": rw}))
"""
    with PeakShmem() as shm:
        r = sandbox.run(code)
    out = report(r)
    tmp_cap = LIMITS.tmp_bytes
    assert out["written"]["/tmp/fill"] <= tmp_cap  # the only writable place, and capped
    assert sum(n for p, n in out["written"].items() if p != "/tmp/fill") == 0, out["written"]
    assert set(out["dev"]) <= {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr"}
    for mountpoint, fstype, options in out["rw_mounts"]:
        if fstype == "tmpfs":
            assert mountpoint == "/tmp" and f"size={tmp_cap // 1024}k" in options, (mountpoint, options)
        else:
            assert mountpoint in ("/proc", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
    assert shm.growth_mb < 100  # 300 MiB were tried in each of eight places


# ---------------------------------------------------------------- escape 3: SysV and other shared memory
def test_shared_memory_is_refused(sandbox):
    code = LIBC + f"""
size = 512 << 20
out = {{}}
out["shmget"] = sc({_DENIED["shmget"][COLUMN]}, 0, size, 0o1000 | 0o600)
out["msgget"] = sc({_DENIED["msgget"][COLUMN]}, 0, 0o1000 | 0o600)
out["semget"] = sc({_DENIED["semget"][COLUMN]}, 0, 1, 0o1000 | 0o600)
out["libc_shmget"] = (libc.shmget(0, size, 0o1000 | 0o600), ctypes.get_errno())
try:
    fd = os.memfd_create("x")
    out["memfd"] = "created"
except OSError as e:
    out["memfd"] = e.errno
try:
    from multiprocessing import shared_memory
    shared_memory.SharedMemory(create=True, size=size)
    out["posix_shm"] = "created"
except Exception as e:
    out["posix_shm"] = type(e).__name__
try:
    import mmap
    m = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    m.write(b"x" * size)
    out["mmap_shared"] = "filled"
except (OSError, MemoryError, ValueError) as e:
    out["mmap_shared"] = type(e).__name__
print(json.dumps(out))
"""
    sysv_before = Path("/proc/sysvipc/shm").read_text()
    with PeakShmem() as shm:
        r = sandbox.run(code)
    out = report(r)
    for name in ("shmget", "msgget", "semget", "libc_shmget"):
        assert out[name] == [-1, 1], (name, out[name])  # EPERM from the seccomp filter
    assert out["memfd"] == 1 and out["posix_shm"] != "created" and out["mmap_shared"] != "filled", out
    assert shm.growth_mb < 100
    assert Path("/proc/sysvipc/shm").read_text() == sysv_before  # (its own ipc namespace besides)


# ---------------------------------------------------------------- escape 4: ptrace and other processes
def test_no_other_process_to_attach_to_or_read(sandbox):
    code = LIBC + f"""
out = {{"pids": sorted(p for p in os.listdir("/proc") if p.isdigit()), "me": os.getpid()}}
out["traceme"] = sc({_DENIED["ptrace"][COLUMN]}, 0, 0, 0, 0)           # PTRACE_TRACEME
out["attach"] = sc({_DENIED["ptrace"][COLUMN]}, 16, 1, 0, 0)           # PTRACE_ATTACH to pid 1
out["seize"] = sc({_DENIED["ptrace"][COLUMN]}, 0x4206, 1, 0, 0)        # PTRACE_SEIZE
out["vm_readv"] = sc({_DENIED["process_vm_readv"][COLUMN]}, 1, 0, 0, 0, 0, 0)
out["vm_writev"] = sc({_DENIED["process_vm_writev"][COLUMN]}, 1, 0, 0, 0, 0, 0)
out["pidfd_getfd"] = sc({_DENIED["pidfd_getfd"][COLUMN]}, 0, 0, 0)
limits = open("/proc/1/limits").read()
out["as_limited"] = any(l.startswith("Max address space") and "unlimited" not in l for l in limits.splitlines())
out["cpu_limited"] = any(l.startswith("Max cpu time") and "unlimited" not in l for l in limits.splitlines())
print(json.dumps(out))
"""
    r = sandbox.run(code)
    out = report(r)
    assert out["pids"] == ["1"] and out["me"] == 1  # the only process in its namespace: pid 1 is itself
    for name in ("traceme", "attach", "seize", "vm_readv", "vm_writev", "pidfd_getfd"):
        assert out[name] == [-1, 1], (name, out[name])
    assert out["as_limited"] and out["cpu_limited"]  # and it is limited itself


def test_every_process_of_the_run_is_limited(sandbox):
    """Seen from the host while a run sleeps: bwrap (outside the namespaces) and the interpreter both carry limits."""
    seen: dict[int, str] = {}

    def watch() -> None:
        pids: set[int] = set()
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and len(pids) < 2:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if b"/box/_driver.py" in Path(f"/proc/{pid}/cmdline").read_bytes() and os.getpid() in _ancestors(int(pid)):
                        pids.add(int(pid))
                except OSError:
                    continue
            time.sleep(0.05)
        time.sleep(1.0)  # the interpreter sets its own limits first thing; the run sleeps 5 s
        for pid in pids:
            seen[pid] = Path(f"/proc/{pid}/limits").read_text()

    watcher = threading.Thread(target=watch)
    watcher.start()
    r = sandbox.run("import time\ntime.sleep(5)")
    watcher.join()
    assert r.ok and len(seen) == 2, (r, list(seen))  # bwrap and the interpreter
    for limits in seen.values():
        line = next(l for l in limits.splitlines() if l.startswith("Max address space"))
        assert line.split()[3] == str(LIMITS.memory_mb << 20), line


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
        out.append(pid)
    return out


def test_memory_bombs_stay_inside_the_limit(sandbox):
    bombs = {
        "touched": "b = []\nwhile True:\n    b.append(bytearray(16 << 20))",
        "one_huge": "x = bytearray(1 << 40)",
        "mmap_anon": "import mmap\nm = mmap.mmap(-1, 1 << 30)\nm.write(b'x' * (1 << 30))",
        "threads": "import threading, time\nts = [threading.Thread(target=time.sleep, args=(5,)) for _ in range(10000)]\n"
        "for t in ts:\n    t.start()",
        "tmpfs_mmap": "import mmap, os\nfd = os.open('/tmp/big', os.O_RDWR | os.O_CREAT)\nos.ftruncate(fd, 1 << 30)\n"
        "m = mmap.mmap(fd, 1 << 30)\nm.write(b'x' * (1 << 30))",
    }
    bombs["empty_files"] = "import os\ni = 0\nwhile True:\n    os.close(os.open(f'/tmp/{i}', os.O_CREAT | os.O_WRONLY))\n    i += 1"
    bombs["nested_dirs"] = "import os\nos.chdir('/tmp')\nwhile True:\n    os.mkdir('d')\n    os.chdir('d')"
    bombs["hard_links"] = "import os\nopen('/tmp/f', 'w').close()\ni = 0\nwhile True:\n    os.link('/tmp/f', f'/tmp/l{i}')\n    i += 1"
    for name, code in bombs.items():
        with PeakShmem() as shm:
            r = sandbox.run(code)
        assert not r.ok, (name, r)
        assert r.wall_s < LIMITS.wall_s + 4 and leftovers(r.run_id) == [], (name, r)
        assert shm.growth_mb < 100, name
    assert sandbox.run(bombs["touched"]).limit == "memory"
    assert sandbox.run(bombs["one_huge"]).limit == "memory"  # an allocation past the limit, nothing touched
    assert sandbox.run("x = ' ' * (1 << 40)").limit == "memory"
    files = sandbox.run(bombs["empty_files"])
    assert files.status is Status.KILLED and files.limit == "file" and "files in /tmp" in files.reason, files


def test_thread_flood_is_stopped(sandbox):
    """Small-stack threads slip under RLIMIT_AS and (for a root caller) RLIMIT_NPROC; the parent counts them."""
    code = (
        "import threading\nthreading.stack_size(32768)\nev = threading.Event()\n"
        "while True:\n    threading.Thread(target=ev.wait).start()"
    )
    r = sandbox.run(code)
    assert r.status is Status.KILLED and r.limit == "processes", r
    assert leftovers(r.run_id) == []
    few = sandbox.run("import threading\nts = [threading.Thread(target=int) for _ in range(16)]\n"
                      "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('ok')")  # fmt: skip
    assert few.ok and few.output == "ok\n", few


def test_socket_buffers_are_not_a_memory_door(sandbox):
    """TCP on the sandbox's own loopback would queue MiBs of kernel buffers per connection; only AF_UNIX/NETLINK."""
    code = """
import json, socket
out = {}
for name, family in [("inet", socket.AF_INET), ("inet6", socket.AF_INET6), ("packet", 17)]:
    try:
        socket.socket(family, socket.SOCK_STREAM if family != 17 else socket.SOCK_RAW)
        out[name] = "created"
    except OSError as e:
        out[name] = e.errno
a, b = socket.socketpair()
a.setblocking(False)
queued = 0
try:
    while True:
        queued += a.send(b"x" * 65536)
except BlockingIOError:
    pass
out["unix_queued"] = queued
print(json.dumps(out))
"""
    out = report(sandbox.run(code))
    assert out["inet"] == out["inet6"] == out["packet"] == 97, out  # EAFNOSUPPORT
    assert out["unix_queued"] < 4 * MIB


def slab_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Slab:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no Slab in /proc/meminfo")


def test_kernel_memory_of_files_is_bounded(sandbox):
    """Empty files cost inodes and dentries (kernel memory), which neither the tmpfs size nor RLIMIT_AS counts."""
    code = "import os\ni = 0\nwhile True:\n    os.close(os.open(f'/tmp/{i}', os.O_CREAT | os.O_WRONLY))\n    i += 1"
    base, peak, stop = slab_mb(), [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], slab_mb())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    r = sandbox.run(code)
    stop.set()
    sampler.join()
    assert r.status is Status.KILLED and r.limit == "file", r
    assert peak[0] - base < 64, (peak[0] - base, r)  # ~2 CPU seconds of this made 290 MiB of slab before


def test_proc_is_read_only(sandbox):
    """The run's uid is the host's root when the caller is root: no write through /proc (global sysctls)."""
    code = """
import json
out = {}
for p in ["/proc/sys/vm/overcommit_memory", "/proc/sys/kernel/hostname", "/proc/self/oom_score_adj"]:
    value = open(p).read()  # writing the value back: harmless even if it went through
    try:
        with open(p, "w") as f:
            f.write(value)
        out[p] = "written"
    except OSError as e:
        out[p] = e.errno
print(json.dumps(out))
"""
    before = Path("/proc/sys/vm/overcommit_memory").read_text()
    out = report(sandbox.run(code))
    assert set(out.values()) == {30}, out  # EROFS
    assert Path("/proc/sys/vm/overcommit_memory").read_text() == before
