"""Reading a run folder that may be hostile: only regular files, only inside the folder, within caps.

A run folder may hold anything: a step file linked to ``/dev/zero`` or to a file
outside the folder, a FIFO that never delivers a byte, a gzip bomb, a line of a
gigabyte, a corrupt gzip stream, lines that are not JSON objects. The viewer
serves the folder to a browser, so every file goes through :func:`open_regular`
(symlinks resolved, the target must lie inside the run folder unless the person
named it on the command line, must be a regular file, is opened with
``O_NONBLOCK`` so a FIFO swapped in never blocks) and every JSONL file through
:func:`json_lines`, which skips a bad line, counts it and goes on, and keeps
what a corrupt gzip stream decoded before the error.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

MAX_FILE_BYTES = 256 * 2**20  # a file's size on disk
MAX_DECOMPRESSED_BYTES = 1024 * 2**20  # what a .gz file may decompress to
MAX_LINE_BYTES = 16 * 2**20  # one JSONL line (one episode)
_CHUNK = 2**20


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


class Refused(Exception):
    """A file the viewer will not read; the message says why (shown on the page)."""


@dataclass
class Skips:
    """What reading skipped: bad lines, and files (or the rest of a file) that could not be read."""

    lines: int = 0
    files: dict[str, str] = field(default_factory=dict)  # file -> why

    def add(self, other: Skips) -> None:
        self.lines += other.lines
        self.files.update(other.files)

    def __bool__(self) -> bool:
        return bool(self.lines or self.files)


def open_regular(path: Path, root: Path | None, max_bytes: int = MAX_FILE_BYTES) -> IO[bytes]:
    """``path`` opened for binary reading, or :class:`Refused`.

    Symlinks are resolved first; with ``root`` the target must lie inside ``root`` (itself resolved).
    Only a regular file of at most ``max_bytes`` is opened, never a FIFO, socket or device: the
    file is checked with ``os.stat`` before it is opened, and opened with ``O_NONBLOCK|O_NOFOLLOW``
    and checked again with ``os.fstat``, so one swapped in between cannot block or mislead."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (older Pythons)
        raise Refused(f"cannot resolve: {e.__class__.__name__}") from None
    if root is not None:
        base = root.resolve()
        if real != base and base not in real.parents:
            raise Refused("leads outside the run folder")
    try:
        st = os.stat(real)
    except OSError as e:
        raise Refused(f"cannot stat: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise Refused("not a regular file")
    if st.st_size > max_bytes:
        raise Refused(f"larger than {_size(max_bytes)}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as e:
        raise Refused(f"cannot open: {e.strerror}") from None
    try:
        st2 = os.fstat(fd)
        if not stat.S_ISREG(st2.st_mode) or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
            raise Refused("changed while being opened")
        os.set_blocking(fd, True)  # a regular file: plain reads from here on
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def append_line(path: Path, root: Path, text: str) -> None:
    """Append one line to ``path`` inside ``root`` (created if missing): never through a symlink, never
    to a FIFO or device (:class:`Refused`), so a hostile folder cannot make a write land elsewhere or block."""
    real_root = root.resolve()
    parent = path.parent.resolve()
    if parent != real_root and real_root not in parent.parents:
        raise Refused("leads outside the run folder")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(parent / path.name, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:  # ELOOP: a symlink; ENXIO: a FIFO nobody reads
        raise Refused(f"cannot open for writing: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("not a regular file")
        os.set_blocking(fd, True)
        data = (text.rstrip("\n") + "\n").encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def read_bytes(path: Path, root: Path | None, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """A whole (small) regular file; :class:`Refused` as :func:`open_regular`."""
    with open_regular(path, root, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise Refused(f"larger than {_size(max_bytes)}")
    return data


def read_json(path: Path, root: Path | None, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """A JSON file; :class:`Refused` when it cannot be read or parsed (the message says why)."""
    data = read_bytes(path, root, max_bytes)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # ValueError: bad JSON or bad UTF-8
        raise Refused(f"not JSON: {e.__class__.__name__}") from None


def _raw_lines(f: IO[bytes], max_line: int, max_total: int, skips: Skips, name: str) -> Iterator[bytes]:
    """Complete lines of ``f``; a line over ``max_line`` bytes is skipped (counted), reading stops
    after ``max_total`` bytes (the rest is counted as a skipped file)."""
    total = 0
    while True:
        line = f.readline(max_line + 1)
        if not line:
            return
        total += len(line)
        if len(line) > max_line:
            skips.lines += 1
            while not line.endswith(b"\n") and total <= max_total:  # discard the rest of the line
                line = f.readline(_CHUNK)
                if not line:
                    return
                total += len(line)
        elif total <= max_total:
            yield line  # the last one may lack its newline: it is parsed all the same
            continue
        if total > max_total:
            skips.files[name] = f"stopped after {_size(max_total)}"
            return


def json_lines(path: Path, root: Path | None, skips: Skips, *, max_file: int = MAX_FILE_BYTES,
               max_decompressed: int = MAX_DECOMPRESSED_BYTES, max_line: int = MAX_LINE_BYTES,
               ) -> Iterator[dict[str, Any]]:
    """The JSON objects of a (gzip) JSONL file, one a line; anything else is skipped and counted in
    ``skips``: a line that is not JSON, not UTF-8, not an object, nested too deep, or too long; a
    file that cannot be opened (see :func:`open_regular`); the rest of a gzip stream after an error
    (what decoded before it is kept)."""
    name = str(path)
    try:
        raw = open_regular(path, root, max_file)
    except Refused as e:
        skips.files[name] = str(e)
        return
    with raw:
        gz = path.suffix == ".gz"
        f: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
        cap = max_decompressed if gz else max_file
        lines = _raw_lines(f, max_line, cap, skips, name)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except (OSError, EOFError, zlib.error) as e:  # corrupt or truncated gzip: keep what came before
                skips.files[name] = f"unreadable after {e.__class__.__name__}: {e}"[:200]
                return
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                skips.lines += 1
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                skips.lines += 1


def finite(x: Any, depth: int = 0) -> Any:
    """``x`` with every NaN or infinity replaced by None (JSON has neither); nesting past 64 levels
    becomes None too."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if depth > 64:
        return None
    if isinstance(x, dict):
        return {str(k): finite(v, depth + 1) for k, v in x.items()}
    if isinstance(x, list):
        return [finite(v, depth + 1) for v in x]
    return x
