"""A run's label, from what the parent measured and the driver's authenticated report, never the exit code
(the parent's side of arena/games/skill_sp/sandbox.py, pure: no process).
"""

from __future__ import annotations

import os
import signal

from arena.games.skill_sp.limits import Limits, SandboxResult, Status
from arena.games.skill_sp.report import parse_report
from arena.games.skill_sp.supervise import _Run, page_table_cap_kb

# A run without a result that used this share of its CPU limit (by the parent's wait4) hit that limit:
# the kernel kills at the limit, but the rusage it reports for the run comes out up to ~7% short of it.
CPU_SHARE = 0.8


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def classify(run: _Run, secret: bytes, mode: str, limits: Limits, wall: float) -> SandboxResult:
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
    if run.limit == "page_tables":
        cap = page_table_cap_kb(limits) >> 10
        return SandboxResult(Status.KILLED, limit="memory", reason=f"page tables past {cap} MiB", **common)
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
