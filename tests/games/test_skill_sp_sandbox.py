"""The Skill-SP sandbox: every hostile program ends as a typed failure within its limits, the host untouched."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from arena.games.skill_sp.sandbox import (
    _DENIED,
    Job,
    Limits,
    Sandbox,
    SandboxPool,
    SandboxUnavailable,
    Status,
    find_bwrap,
    no_exec_filter,
    no_fork_filter,
)

REPO = Path(__file__).resolve().parents[2]
LIMITS = Limits(wall_s=8.0, cpu_s=1, memory_mb=128, output_bytes=1 << 16, file_bytes=1 << 16, tmp_bytes=1 << 20)
SLACK_S = 4.0  # killing and reaping on a loaded 2-core machine


def start_sandbox(limits: Limits, **kwargs: Any) -> Sandbox:
    """A sandbox with ``limits``; the test is skipped only when no bubblewrap binary exists.

    A bubblewrap that is there but fails our own start-up probe is a failure: it is how a
    bug in the sandbox's limits or filters shows first, and a skip would hide it."""
    try:
        find_bwrap()
    except SandboxUnavailable as exc:
        pytest.skip(f"no bubblewrap on this machine: {exc}")
    try:
        return Sandbox(limits, **kwargs)
    except SandboxUnavailable as exc:
        pytest.fail(f"the sandbox's start-up probe failed: {exc}")


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return start_sandbox(LIMITS)


def test_a_failed_start_up_probe_fails_the_test_instead_of_skipping_it():
    """bubblewrap is here; a sandbox whose probe cannot run (here: a launcher that exits at once) is a
    test failure, where it used to skip every test of the module."""
    with pytest.raises(BaseException) as raised:  # noqa: PT011 - Skipped and Failed are BaseExceptions
        start_sandbox(LIMITS, bwrap="/bin/false")
    assert raised.type is pytest.fail.Exception, raised
    assert "start-up probe failed" in str(raised.value)


def leftovers(run_id: str) -> list[int]:
    """Host processes still carrying the run's id in their command line."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if run_id.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return found


def assert_contained(result, *, statuses, limit=None):
    assert result.status in statuses, result
    if limit is not None:
        assert result.limit == limit, result
    assert result.wall_s <= LIMITS.wall_s + SLACK_S
    assert len(result.output) <= LIMITS.output_bytes and len(result.stderr) <= LIMITS.output_bytes
    assert result.run_id and leftovers(result.run_id) == []


def test_ok_run_and_call(sandbox):
    r = sandbox.run("import sys; print('hi'); print('err', file=sys.stderr)")
    assert r.status is Status.OK and r.output == "hi\n" and r.stderr == "err\n"
    c = sandbox.call("m", "double", {"x": 21}, {"m.py": "def double(x):\n    print('noise')\n    return {'y': 2 * x}\n"})
    assert c.ok and c.value == {"y": 42} and c.stderr == "noise\n"


def test_errors_are_typed(sandbox):
    assert sandbox.run("raise ValueError('bad')").reason == "ValueError: bad"
    assert sandbox.run("import sys; sys.exit(2)").status is Status.ERROR
    assert sandbox.run("def f(:").status is Status.ERROR  # a syntax error is the code's error, not ours
    bad_value = sandbox.call("m", "f", {}, {"m.py": "def f():\n    return object()\n"})
    assert bad_value.status is Status.ERROR and "not JSON" in bad_value.stderr
    forged = sandbox.call("m", "f", {}, {"m.py": "import os\ndef f():\n    os.write(1, b'junk')\n    return 1\n"})
    assert forged.status is Status.ERROR
    assert sandbox.call("m", "nope", {}, {"m.py": ""}).status is Status.ERROR
    assert sandbox.call("m", "f", {"x": object()}, {"m.py": ""}).status is Status.ERROR
    assert sandbox.run("print(1)", files={"../escape.py": ""}).status is Status.ERROR


def test_infinite_loop(sandbox):
    assert_contained(sandbox.run("while True:\n    pass"), statuses={Status.TIMEOUT})


def test_sleep_hits_the_wall_clock(sandbox):
    r = sandbox.run("import time\ntime.sleep(60)", limits=Limits(wall_s=1.0))
    assert r.status is Status.TIMEOUT and r.limit == "wall" and r.wall_s < 1.0 + SLACK_S
    assert leftovers(r.run_id) == []


def test_memory_bomb(sandbox):
    r = sandbox.run("blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))")
    assert_contained(r, statuses={Status.KILLED}, limit="memory")


def test_fork_bomb(sandbox):
    r = sandbox.run("import os\nwhile True:\n    os.fork()")
    assert_contained(r, statuses={Status.ERROR})
    assert "BlockingIOError" in r.reason
    spawn = sandbox.run("import subprocess\nsubprocess.run(['/bin/true'])")
    assert_contained(spawn, statuses={Status.ERROR})


def test_threads_still_work(sandbox):
    r = sandbox.run("import threading\nt = threading.Thread(target=print, args=('t',))\nt.start()\nt.join()")
    assert r.status is Status.OK and r.output == "t\n"


def test_network_connection_attempt(sandbox):
    """A listener on the host's loopback is reachable from the host and not from the sandbox."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        r = sandbox.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)")
        assert_contained(r, statuses={Status.ERROR})
        assert "ConnectionRefusedError" in r.reason or "OSError" in r.reason
        with pytest.raises(TimeoutError):
            server.accept()  # nobody came
        interfaces = sandbox.run("import socket\nprint(sorted(name for _, name in socket.if_nameindex()))")
        assert interfaces.output.strip() == "['lo']"  # no route anywhere but the sandbox's own loopback
    finally:
        server.close()


def test_write_outside_the_temp_folder(sandbox, tmp_path):
    targets = [tmp_path / "escaped.txt", REPO / "escaped-by-sandbox.txt", Path("/escaped-by-sandbox.txt")]
    code = "\n".join(
        ["import os", "errors = 0"]
        + [f"try:\n    open({str(t)!r}, 'w').write('x')\nexcept OSError:\n    errors += 1" for t in targets]
        + ["open('inside.txt', 'w').write('fine')", f"assert errors == {len(targets)}, errors", "print('contained')"]
    )
    r = sandbox.run(code)
    assert r.status is Status.OK and r.output == "contained\n", r
    assert not any(t.exists() for t in targets)
    assert leftovers(r.run_id) == []


def test_file_size_caps(sandbox):
    one_big = sandbox.run("open('big', 'wb').write(b'x' * (1 << 17))")
    assert_contained(one_big, statuses={Status.ERROR}, limit="file")
    many = sandbox.run("for i in range(64):\n    open(f'f{i}', 'wb').write(b'x' * 60000)")
    assert_contained(many, statuses={Status.ERROR})
    assert "No space left" in many.reason


def test_one_gigabyte_print(sandbox):
    t0 = time.monotonic()
    r = sandbox.run("import sys\nchunk = 'x' * 65536\nfor _ in range(16384):\n    sys.stdout.write(chunk)")
    assert_contained(r, statuses={Status.KILLED}, limit="output")
    assert time.monotonic() - t0 < LIMITS.wall_s


def test_reading_the_repository(sandbox):
    for path in (REPO / "pyproject.toml", REPO / "arena" / "games" / "skill_sp" / "sandbox.py", Path.home() / ".bashrc"):
        r = sandbox.run(f"print(open({str(path)!r}).read())")
        assert_contained(r, statuses={Status.ERROR})
        assert "FileNotFoundError" in r.reason or "PermissionError" in r.reason
    listing = sandbox.run("import os\nprint(sorted(os.listdir('/')))")
    assert not any(name in listing.output for name in ("'etc'", "'home'", "'work'", "'var'"))


def test_limits_cannot_be_raised_back(sandbox):
    r = sandbox.run("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))")
    assert r.status is Status.ERROR and "not allowed to raise" in r.reason


def test_pool_runs_concurrently_and_in_order(sandbox):
    with SandboxPool(sandbox, workers=4) as pool:
        t0 = time.monotonic()
        results = pool.map([Job(files={}, code=f"import time\ntime.sleep(1)\nprint({i})") for i in range(4)])
        elapsed = time.monotonic() - t0
    assert [r.output for r in results] == [f"{i}\n" for i in range(4)]
    assert elapsed < 3.5  # four 1 s sleeps overlap (serial would be > 4 s)


def test_pool_turns_bad_jobs_into_typed_errors(sandbox):
    with SandboxPool(sandbox, workers=2) as pool:
        [r] = pool.map([Job(files={})])
    assert r.status is Status.ERROR


def run_bpf(prog: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    """A tiny classic-BPF interpreter for the instructions the filter uses, over one ``seccomp_data``."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.parametrize(
    ("machine", "arch", "clone", "forks"), [("x86_64", 0xC000003E, 56, (57, 58)), ("aarch64", 0xC00000B7, 220, ())]
)
def test_seccomp_filter_logic(machine, arch, clone, forks):
    prog = no_fork_filter(machine)
    allow, eagain, enosys, kill = 0x7FFF0000, 0x50000 | 11, 0x50000 | 38, 0x80000000
    assert run_bpf(prog, 0 if machine == "x86_64" else 63, arch) == allow  # read: anything else passes
    assert run_bpf(prog, clone, arch, arg0=0x3D0F00) == allow  # pthread_create's flags include CLONE_THREAD
    assert run_bpf(prog, clone, arch, arg0=0x01200011) == eagain  # fork() through clone
    assert run_bpf(prog, 435, arch) == enosys  # clone3: glibc falls back to clone
    assert run_bpf(prog, 0x40000000 + 57, arch) == enosys  # x32 ABI
    assert run_bpf(prog, 1, 0x40000003) == kill  # a foreign architecture
    for nr in forks:
        assert run_bpf(prog, nr, arch) == eagain


@pytest.mark.parametrize(("machine", "arch", "column", "clone"), [("x86_64", 0xC000003E, 0, 56), ("aarch64", 0xC00000B7, 1, 220)])
def test_seccomp_deny_list_and_exec_filter_logic(machine, arch, column, clone):
    prog, noexec = no_fork_filter(machine), no_exec_filter(machine)
    allow, eperm, kill = 0x7FFF0000, 0x50000 | 1, 0x80000000
    for name, nrs in _DENIED.items():
        if nrs[column] is not None:
            assert run_bpf(prog, nrs[column], arch) == eperm, name
    assert run_bpf(prog, clone, arch, arg0=0x3D0F00 | 0x40000000) == eperm  # a thread in a new network namespace
    assert run_bpf(prog, clone, arch, arg0=0x3D0F00 | 0x10000000) == eperm  # ... or user namespace
    execve, execveat = (59, 322) if machine == "x86_64" else (221, 281)
    assert run_bpf(prog, execve, arch) == allow  # bubblewrap's filter must let it exec the interpreter
    assert run_bpf(noexec, execve, arch) == run_bpf(noexec, execveat, arch) == eperm
    assert run_bpf(noexec, 63, arch) == allow and run_bpf(noexec, execve, 0x40000003) == kill
    sock = 41 if machine == "x86_64" else 198
    assert run_bpf(prog, sock, arch, arg0=1) == run_bpf(prog, sock, arch, arg0=16) == allow  # AF_UNIX, AF_NETLINK
    assert run_bpf(prog, sock, arch, arg0=2) == run_bpf(prog, sock, arch, arg0=10) == 0x50000 | 97  # AF_INET(6)


def test_pool_cache_keeps_successes_only(sandbox):
    with SandboxPool(sandbox, workers=2, cache_size=2) as pool:
        job = Job(files={}, code="import time\nprint(time.time_ns())")
        first, again = pool.map([job])[0], pool.map([job])[0]
        assert first.ok and again is first  # served from the cache
        failing = Job(files={}, code="raise SystemExit(3)")
        a, b = pool.map([failing])[0], pool.map([failing])[0]
        assert not a.ok and b is not a  # failures run again
        for i in range(3):
            pool.map([Job(files={}, code=f"print({i})")])
        assert pool.map([job])[0] is not first  # evicted (least recently used)
