"""The peak resident memory of a command's whole process tree (issue #54: ``make train``'s memory).

    .venv/bin/python bench/train_memory.py [--interval 0.5] [--timeline FILE.csv] -- CMD [ARG ...]

e.g. ``OMP_NUM_THREADS=1 .venv/bin/python bench/train_memory.py -- .venv/bin/python -m arena.train
games/spy/spy.yaml`` (what ``make train`` runs).

Every ``--interval`` seconds it reads ``/proc`` for the command and each of its descendants (vLLM
may start worker processes) and sums their resident sets (``VmRSS``: anonymous, file-backed and
shared pages; pages two processes share count twice, so the sum is an upper bound of what the tree
holds) and their proportional sets (``Pss`` from ``smaps_rollup``: a shared page split between its
sharers, so the sum is what the tree holds). It prints the peaks of both sums, when they happened,
the largest process's own high-water mark (``ru_maxrss`` of the children once they have ended, which
samples cannot miss), the exit status and the wall time. ``--timeline`` appends every sample (seconds,
processes, RSS MiB, anonymous RSS MiB, PSS MiB) to a CSV as it is taken, to find which phase of a run
holds the peak. SIGTERM or SIGINT (e.g. ``timeout``) stops the command and still prints the summary.

A peak shorter than the interval can fall between samples; ``ru_maxrss`` bounds the largest process
exactly, so a tree of one process is measured exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

MIB = 2**20


@dataclass
class Sample:
    """One reading of the tree: seconds since start, process count and the sums in bytes."""

    t: float
    procs: int
    rss: int
    anon: int
    pss: int


@dataclass
class Peaks:
    """The largest sums seen, with the sample each came from."""

    rss: Sample | None = None
    pss: Sample | None = None
    samples: list[Sample] = field(default_factory=list)

    def add(self, s: Sample) -> None:
        self.samples.append(s)
        if self.rss is None or s.rss > self.rss.rss:
            self.rss = s
        if self.pss is None or s.pss > self.pss.pss:
            self.pss = s


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's ``children`` list); [] once it is gone."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return out


def tree(root: int) -> list[int]:
    """``root`` and all its descendants still alive."""
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo += children(pid)
    return seen


def status_kib(pid: int, keys: tuple[str, ...]) -> dict[str, int]:
    """The ``kB`` fields ``keys`` of ``/proc/<pid>/status`` (absent ones: 0; a process gone: {})."""
    try:
        rows = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    got = {k: 0 for k in keys}
    for row in rows:
        name, _, rest = row.partition(":")
        if name in got:
            got[name] = int(rest.split()[0])
    return got


def pss_kib(pid: int) -> int:
    """``Pss`` of ``/proc/<pid>/smaps_rollup`` (0 when it cannot be read)."""
    try:
        for row in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if row.startswith("Pss:"):
                return int(row.split()[1])
    except OSError:
        pass
    return 0


def sample(root: int, t: float) -> Sample:
    rss = anon = pss = procs = 0
    for pid in tree(root):
        st = status_kib(pid, ("VmRSS", "RssAnon"))
        if not st:
            continue
        procs += 1
        rss += st["VmRSS"]
        anon += st["RssAnon"]
        pss += pss_kib(pid)
    return Sample(t, procs, rss * 1024, anon * 1024, pss * 1024)


def measure(cmd: list[str], interval: float, timeline: Path | None = None) -> tuple[int, float, Peaks, int]:
    """Run ``cmd``, sampling its tree every ``interval`` s (each sample appended to ``timeline`` as it is taken):
    (exit status, wall seconds, peaks, the largest descendant's ``ru_maxrss`` in bytes). SIGTERM or SIGINT
    ends the command's process group and still returns what was measured."""
    peaks = Peaks()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, start_new_session=True)

    def stop(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    out = timeline.open("w", newline="", buffering=1) if timeline else None
    try:
        if out:
            out.write("t_s,procs,rss_mib,anon_mib,pss_mib\n")
        while proc.poll() is None:
            s = sample(proc.pid, time.monotonic() - start)
            peaks.add(s)
            if out:
                out.write(f"{s.t:.1f},{s.procs},{s.rss / MIB:.0f},{s.anon / MIB:.0f},{s.pss / MIB:.0f}\n")
            time.sleep(interval)
    finally:
        if out:
            out.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    wall = time.monotonic() - start
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: kB
    return proc.wait(), wall, peaks, maxrss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples (default 0.5)")
    parser.add_argument("--timeline", type=Path, help="write every sample to this CSV")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("give the command after --, e.g. -- .venv/bin/python -m arena.train games/spy/spy.yaml")
    if not 0.01 <= args.interval <= 60:
        parser.error(f"--interval {args.interval:g}: give 0.01 to 60 seconds")
    if not Path("/proc/self/status").exists():
        parser.error("needs Linux /proc")
    rc, wall, peaks, maxrss = measure(cmd, args.interval, args.timeline)
    print(f"command: {' '.join(cmd)}")
    print(f"exit {rc}, {wall:.0f} s, {len(peaks.samples)} samples every {args.interval:g} s")
    if peaks.rss is not None and peaks.pss is not None:
        r, p = peaks.rss, peaks.pss
        print(f"peak tree RSS: {r.rss / MIB:,.0f} MiB ({r.rss / 1e9:.2f} GB) at {r.t:.0f} s, {r.procs} processes, "
              f"{r.anon / MIB:,.0f} MiB of it anonymous")
        print(f"peak tree PSS: {p.pss / MIB:,.0f} MiB ({p.pss / 1e9:.2f} GB) at {p.t:.0f} s")
    print(f"largest process's high-water mark (ru_maxrss): {maxrss / MIB:,.0f} MiB ({maxrss / 1e9:.2f} GB)")
    return rc if rc >= 0 else 128 - rc  # a signal: the shell's convention


if __name__ == "__main__":
    sys.exit(main())
