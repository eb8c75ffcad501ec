"""The parent's side of one sandboxed run (arena/games/skill_sp/sandbox.py): handing the driver its
secret, limiting bubblewrap's launcher, holding the interpreter by a pidfd from the moment bwrap
reports its pid, watching its threads and its ``/tmp`` from outside while it runs, collecting its
output under the caps, and killing it (and so its pid namespace) at the end of every run. The threat
model, and what each of these promises, is the sandbox module's docstring.
"""

from __future__ import annotations

import json
import os
import resource
import select
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from arena.games.skill_sp._driver import READY
from arena.games.skill_sp.limits import Limits


def _send_secret(proc: subprocess.Popen[bytes], secret: bytes) -> None:
    """The secret on the driver's stdin (33 bytes: fits the pipe, never blocks), then EOF."""
    if proc.stdin is None:
        return
    try:
        if secret:
            proc.stdin.write(secret + b"\n")
    except OSError:
        pass  # bwrap died at once; the result says so
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _limit_launcher(pid: int, lim: Limits) -> None:
    """The run's memory, CPU, file-size and core limits on ``bwrap`` itself (outside the sandbox's namespaces,
    out of the code's reach), so no process of the run's tree is unlimited; the interpreter sets its own.
    Not RLIMIT_NPROC: ``bwrap`` may still have to fork, counted against the caller's uid."""
    for res, value in ((resource.RLIMIT_AS, lim.memory_mb << 20), (resource.RLIMIT_CPU, lim.cpu_s),
                       (resource.RLIMIT_FSIZE, lim.file_bytes), (resource.RLIMIT_CORE, 0)):  # fmt: skip
        try:
            resource.prlimit(pid, res, (value, value))
        except (OSError, ValueError):  # gone already, or a hard limit lower than ours
            pass


# A minimal, read-only /dev: a 64 KiB tmpfs holding only null, zero, full, random,
# urandom and the fd links, remounted read-only (device nodes stay usable: the
# read-only flag does not apply to them).
_DEV = [
    "--size", "65536", "--tmpfs", "/dev",
    *[a for d in ("null", "zero", "full", "random", "urandom") for a in ("--dev-bind", f"/dev/{d}", f"/dev/{d}")],
    "--symlink", "/proc/self/fd", "/dev/fd", "--symlink", "/proc/self/fd/0", "/dev/stdin",
    "--symlink", "/proc/self/fd/1", "/dev/stdout", "--symlink", "/proc/self/fd/2", "/dev/stderr",
    "--remount-ro", "/dev",
]  # fmt: skip


@dataclass
class _Run:
    """What the parent saw of one run: the pipes' bytes, its own limit, and ``wait4``'s status and rusage."""

    out: bytes
    err: bytes
    report: bytes
    limit: str | None
    status: int | None  # the raw wait status of bwrap (None if it could not be reaped)
    cpu_s: float
    note: str = ""  # why the run never started (the parent could not take hold of it), if so


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait4(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, Any] | None:
    """``os.wait4`` with a timeout: (wait status, rusage of bwrap and every process it reaped), or None."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return status, usage
        if time.monotonic() > deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


POLL_S = 0.02  # how often the parent looks at the run's threads and /tmp


class _Child:
    """The sandboxed interpreter as the parent holds it: a pidfd, its ``/proc/PID`` and its ``/tmp``.

    Taken from bwrap's ``--info-fd`` report (the child's pid and pid namespace) while the
    driver waits for its secret, before any untrusted code runs; from then on nothing the
    code does hides the run: not clearing its parent-death signal, not rewriting its argv
    (the old ``/proc/*/cmdline`` search for the run's token), not its own session, not
    leaving its main thread (which makes ``/proc/PID/root`` unreadable). The parent
    SIGKILLs it through the pidfd at the end of every run; it is the init of its pid
    namespace, so every thread and process of the run dies with it.

    Threads come from ``stat`` read through the ``/proc/PID`` descriptor (valid for this
    process only, never a later one with the same pid); inodes from ``fstatvfs`` of a
    descriptor of the run's ``/tmp``, opened once and measured from outside.
    """

    def __init__(self) -> None:
        self.pidfd: int | None = None
        self.proc: int | None = None
        self.tmp: int | None = None
        self.most = 0  # most inodes seen in /tmp

    def attach(self, info: bytes) -> str | None:
        """Hold the process bwrap reported (``child-pid``, checked against its ``pid-namespace``); None or why not."""
        try:
            data = json.loads(info)
            pid, pidns = int(data["child-pid"]), int(data["pid-namespace"])
        except (ValueError, KeyError, TypeError):
            return "bwrap reported no child process"
        try:
            self.pidfd = os.pidfd_open(pid)
            self.proc = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
            same = os.stat("ns/pid", dir_fd=self.proc).st_ino == pidns
        except OSError as exc:
            return f"the run's process cannot be held ({exc.strerror})"
        # Alive now, so it held its pid since pidfd_open: the /proc descriptor is of the same process.
        return None if same and not self.exited() else "the run's process is gone"

    def watch_tmp(self, limits: Limits) -> str | None:
        """Open the run's ``/tmp`` (the driver runs in its final root): None, or why it cannot be watched."""
        if self.proc is None:
            return "the run's process is not held"
        try:
            self.tmp = os.open("root/tmp", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.proc)
            st = os.fstatvfs(self.tmp)
        except OSError as exc:
            return f"the run's /tmp cannot be watched ({exc.strerror})"
        if not 0 <= st.f_blocks * st.f_frsize - limits.tmp_bytes < 1 << 16:
            return "the run's /tmp is not its own tmpfs"
        return None

    def exited(self) -> bool:
        return self.pidfd is None or _readable(self.pidfd, 0.0)

    def over(self, limits: Limits) -> str | None:
        """The limit the run is past ("files", "processes" or "page_tables"), else None."""
        if self.tmp is not None:
            try:
                st = os.fstatvfs(self.tmp)
            except OSError:  # not seen on Linux for an open descriptor; never a reason to raise
                st = None
            self.most = max(self.most, st.f_files - st.f_ffree if st else 0)
            if self.most > limits.tmp_files:
                return "files"
        if self.proc is not None:
            try:
                fd = os.open("stat", os.O_RDONLY, dir_fd=self.proc)
                try:
                    stat = os.read(fd, 4096).decode()
                finally:
                    os.close(fd)
                if int(stat[stat.rindex(")") + 2 :].split()[17]) > limits.processes:  # field 20: num_threads
                    return "processes"
            except (OSError, ValueError, IndexError):  # exited: nothing left to count
                pass
            if self.page_tables_kb() > page_table_cap_kb(limits):
                return "page_tables"
        return None

    def page_tables_kb(self) -> int:
        """``VmPTE`` of the run: its page tables, which RLIMIT_AS does not count (0 once it has exited).

        Read from the process's ``status``, or, once its main thread has left (a zombie leader
        shows no memory), from a thread of it that still runs."""
        if self.proc is None:
            return 0
        found = _vm_pte(self.proc, "status")
        if found is not None:
            return found
        try:
            tasks = os.open("task", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.proc)
        except OSError:
            return 0
        try:
            for tid in os.listdir(tasks)[:8]:
                found = _vm_pte(tasks, f"{tid}/status")
                if found is not None:
                    return found
        except OSError:
            pass
        finally:
            os.close(tasks)
        return 0

    def kill(self) -> None:
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:  # already gone
                pass

    def close(self, within_s: float = 5.0) -> None:
        """SIGKILL the run (whatever it did), wait until it has exited, release the descriptors."""
        self.kill()
        if self.pidfd is not None:
            _readable(self.pidfd, within_s)
        for fd in (self.pidfd, self.proc, self.tmp):
            if fd is not None:
                os.close(fd)
        self.pidfd = self.proc = self.tmp = None


def page_table_cap_kb(limits: Limits) -> int:
    """Page tables a run may hold: 1/16 of ``memory_mb`` (16 MiB at the default 256 MiB).

    Dense use needs 1/512 of the memory it maps; one 4 KiB page in each of 60 000 GiB-apart mappings
    needs 8 KiB each: 483 MiB under a 256 MiB RLIMIT_AS before the parent polled this."""
    return limits.memory_mb * 64


def _vm_pte(dir_fd: int, path: str) -> int | None:
    """The ``VmPTE`` line of a ``status`` file under ``dir_fd``, in KiB; None where there is none."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
        try:
            text = os.read(fd, 8192)
        finally:
            os.close(fd)
        at = text.index(b"\nVmPTE:")
        return int(text[at + 7 : text.index(b"kB", at)])
    except (OSError, ValueError):
        return None


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` polls readable (or hung up) within ``timeout_s``; poll, not select: any fd number."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, int(timeout_s * 1000))))


def _read_until(fd: int, deadline: float, want: int | None = None) -> bytes | None:
    """Bytes from ``fd`` until EOF (or ``want`` bytes); None if the deadline passes first."""
    data = b""
    while want is None or len(data) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if not _readable(fd, left):
            continue
        chunk = os.read(fd, 4096 if want is None else want - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _attach(child: _Child, info_r: int, result_r: int, limits: Limits, start: float) -> str | None:
    """Take hold of a starting run before it gets its secret: None when held, "wall", or why not.

    bwrap writes the child's pid on ``info_r`` before it lets the child go on; the driver
    writes ``READY`` on the result pipe once it runs in the sandbox's root and then waits
    for the secret. A bwrap that fails to set up closes both without either.
    """
    deadline = start + limits.wall_s
    info = _read_until(info_r, deadline)
    if info is None:
        return "wall"
    reason = child.attach(info)
    if reason is not None:
        return reason
    ready = _read_until(result_r, deadline, want=len(READY))
    if ready is None:
        return "wall"
    if ready != READY:
        return "the sandbox exited before its driver ran"
    return child.watch_tmp(limits)


def _collect(proc: subprocess.Popen[bytes], result_pipe: Any, limits: Limits, start: float, child: _Child,
             note: str | None) -> _Run:  # fmt: skip
    """Read stdout, stderr and the result pipe up to the output cap until exit or the wall clock; kill on either."""
    if proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the sandbox process was started without pipes")
    pipes = (proc.stdout, proc.stderr, result_pipe)
    fds = [f.fileno() for f in pipes]
    bufs = {fd: bytearray() for fd in fds}
    limit: str | None = "wall" if note == "wall" else None
    with selectors.DefaultSelector() as sel:
        for f in pipes:
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map() and limit is None:
            left = limits.wall_s - (time.monotonic() - start)
            if left <= 0:
                limit = "wall"
                break
            limit = child.over(limits)
            if limit is not None:
                break
            for key, _ in sel.select(timeout=min(left, POLL_S)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                bufs[key.fd] += chunk
            if sum(map(len, bufs.values())) > limits.output_bytes + 256:  # 256: the report's secret and framing
                limit = "output"
                break
    if limit is not None:
        child.kill()
        _kill(proc)
    waited = _wait4(proc, max(1.0, limits.wall_s - (time.monotonic() - start)))
    if waited is None:  # the pipes closed but the process lingers
        child.kill()
        _kill(proc)
        waited = _wait4(proc, 5.0)
        limit = limit or "wall"
    proc.stdout.close()
    proc.stderr.close()
    cap = limits.output_bytes
    status, usage = waited if waited is not None else (None, None)
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    out, err, report = (bytes(bufs[fd]) for fd in fds)
    return _Run(out[:cap], err[:cap], report, limit, status, cpu, note if note and note != "wall" else "")

