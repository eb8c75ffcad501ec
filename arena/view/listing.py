"""Which files of a run folder the viewer shows, listed without opening them.

Episode files come from four places (see :mod:`arena.view.store`) and tournament JSONs from
three patterns; each is listed once per request by :func:`arena.view.files.list_folder`: one
``scandir`` a folder and one ``lstat`` an entry, from the run folder's descriptor, links never
followed. The ``lstat`` is what the store's cache compares, so a listing of files that did not
change opens none of them (20,000 step files list in a fraction of a second). A folder that
vanishes meanwhile lists nothing; the run folder itself gone is :class:`arena.view.files.Gone`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NamedTuple

from arena.view.files import MAX_FILE_BYTES, Refused, list_folder, open_folder, refusal, relative_parts, signature
from arena.view.record import EPISODES_DIR

PLAY_FILE = ("play", "episodes.jsonl")
EVALS_DIR = "evals"  # arena/loop/evals.py writes <run_dir>/evals/<name>/step_S.jsonl.gz
_STEP = re.compile(r"step_(\d{1,18})", re.ASCII)
_STEP_FILE = re.compile(r"step_(\d{1,18})?.*\.jsonl\.gz\Z", re.ASCII | re.DOTALL)  # step_*.jsonl.gz


class Listed(NamedTuple):
    """A file as listed: the folder it lies in and its name, its key (its whole path inside the run
    folder, or the path as written when it lies outside), its step and source, what the cache
    compares (device, inode, size, mtime from its ``lstat``; None when it was not listed from its
    folder: open it to know), and why it is not read when the listing already says so."""

    folder: Path
    name: str
    key: str
    step: int | None = None
    source: str = ""
    sig: tuple[int, int, int, int] | None = None
    error: str | None = None

    @property
    def path(self) -> Path:
        return self.folder / self.name  # made when needed: 20,000 Paths cost a listing half a second
    # (a NamedTuple, not a frozen dataclass, for the same reason: made 20,000 times a listing)


def _step(name: str) -> int | None:
    """The step a file's name gives: the first ``step_<digits>`` in it (its first 18 digits)."""
    m = _STEP.search(name)
    return int(m.group(1)) if m else None


def _file(folder: Path, parts: Sequence[str], st: os.stat_result, step: int | None = None,
          source: str = "") -> Listed:
    """A file listed from ``folder`` (the folder of ``parts``, made once for all its files)."""
    key = "/".join(parts)
    error = refusal(st, key)
    return Listed(folder, parts[-1], key, step, source, None if error else signature(st), error)


def _linked_folder(run_dir: Path, parts: Sequence[str]) -> Listed:
    key = "/".join(parts)
    return Listed(run_dir.joinpath(*parts[:-1]), parts[-1], key,
                  error=f"{key} is a link or not a folder (links are not followed)")


def _outside(path: Path, key: str, source: str = "") -> Listed:
    return Listed(path.parent, path.name, key, None, source)


def _in_folders(run_dir: Path, fd: int, top: Sequence[str], folder: str, pattern: str) -> list[tuple[list[str], Any]]:
    """(parts, lstat) of the files matching ``pattern`` in each folder of ``top`` whose name matches
    ``folder``; a link where a folder matched is listed as ``(parts, None)``."""
    out: list[tuple[list[str], Any]] = []
    for name, st in list_folder(fd, top):
        if name.startswith(".") or not fnmatchcase(name, folder):
            continue
        if stat.S_ISLNK(st.st_mode):
            if run_dir.joinpath(*top, name).is_dir():  # a link to a folder: said so; one to a file: not a match
                out.append(([*top, name], None))
        elif stat.S_ISDIR(st.st_mode):
            out += [([*top, name, f], fst) for f, fst in list_folder(fd, [*top, name]) if fnmatchcase(f, pattern)]
    return out


def episode_files(run_dir: Path, config: dict[str, Any]) -> list[Listed]:
    """The episode files in display order: training's steps (or, when there are none, the runner's
    log named by ``config``), the held-out evaluations' steps, the games played in the viewer."""
    fd = open_folder(run_dir)
    try:
        files = _steps(run_dir, list_folder(fd, [EPISODES_DIR]))
        if not files:
            files += _runner_log(run_dir, config)
        for parts, st in _in_folders(run_dir, fd, [EVALS_DIR], "*", "step_*.jsonl*"):
            files.append(_linked_folder(run_dir, parts) if st is None else
                         _file(run_dir.joinpath(*parts[:-1]), parts, st, _step(parts[-1]), f"eval:{parts[-2]}"))
        files += [_file(run_dir / PLAY_FILE[0], PLAY_FILE, st, None, "play")
                  for name, st in list_folder(fd, PLAY_FILE[:1]) if name == PLAY_FILE[1]]
        return files
    finally:
        os.close(fd)


def _steps(run_dir: Path, entries: list[tuple[str, os.stat_result]]) -> list[Listed]:
    """Training's step files among ``entries`` of the episodes folder: :func:`_file` written out,
    for this is the loop a listing of 20,000 files spends its time in."""
    folder, out = run_dir / EPISODES_DIR, []
    for name, st in entries:
        m = _STEP_FILE.match(name)
        if m is None:
            continue
        key = EPISODES_DIR + "/" + name
        step = int(m.group(1)) if m.group(1) else _step(name)
        if st.st_nlink == 1 and stat.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE_BYTES:
            out.append(Listed(folder, name, key, step, "train", (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)))
        else:
            out.append(Listed(folder, name, key, step, "train", None, refusal(st, key)))
    return out


def _runner_log(run_dir: Path, config: dict[str, Any]) -> list[Listed]:
    """``runner.episodes_jsonl`` of the run's config, when it exists (read only if inside the run folder)."""
    log = (config.get("runner") or {}).get("episodes_jsonl") if isinstance(config.get("runner"), dict) else None
    if not isinstance(log, str) or not log:
        return []
    path = Path(log) if Path(log).is_absolute() else run_dir / log
    if not path.exists():
        path = Path(log)  # relative to where training ran
    if not path.exists():
        return []
    try:
        key = "/".join(relative_parts(path, run_dir))
    except Refused:
        key = str(path)
    return [_outside(path, key, "log")]


def tournament_files(run_dir: Path, extra: Sequence[Path]) -> list[Listed]:
    """Tournament JSONs: those named on the command line, then ``*.json`` of the run folder (not
    ``config.json``), ``tournament*/*.json`` and ``tournaments/*/*.json``, each pattern sorted."""
    found = [_outside(p, str(p)) for p in extra]
    fd = open_folder(run_dir)
    try:
        found += [_file(run_dir, [name], st) for name, st in list_folder(fd)
                  if fnmatchcase(name, "*.json") and name != "config.json"]
        for top, folder in (([], "tournament*"), (["tournaments"], "*")):
            found += [_linked_folder(run_dir, parts) if st is None else _file(run_dir.joinpath(*parts[:-1]), parts, st)
                      for parts, st in _in_folders(run_dir, fd, top, folder, "*.json")]
    finally:
        os.close(fd)
    first: dict[Path, Listed] = {}
    for f in found:
        first.setdefault(f.path, f)  # each path once, where it came first
    return list(first.values())
