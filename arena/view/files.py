"""Reading a run folder that may be hostile: only regular files, only inside the folder, within caps.

A run folder may hold anything: a step file linked to ``/dev/zero`` or to a file
outside the folder, a folder swapped for such a link while the viewer reads, a
hard link to a file elsewhere, a FIFO that never delivers a byte, a gzip bomb,
a line of a gigabyte, a corrupt gzip stream, lines that are not JSON objects.
The viewer serves the folder to a browser, so:

* every file is opened by :func:`open_regular`, which walks from the run folder's
  own descriptor one component at a time (``os.open`` with ``dir_fd`` and
  ``O_NOFOLLOW`` at each, ``O_DIRECTORY`` for folders): a link anywhere on the way
  is refused, so a folder swapped for a link between a listing and the open leads
  nowhere; the file must be a regular file (opened ``O_NONBLOCK``, so a FIFO never
  blocks) with one hard link, within a size cap;
* a gzip file may decompress to at most :data:`MAX_DECOMPRESSED_BYTES`; past that
  the file is refused as a whole (:attr:`Skips.refused`), never half shown;
* a JSON text (a file, or one JSONL line) is parsed only when its estimated size
  in memory (:func:`json_cost`) fits :data:`MAX_PARSE_BYTES`;
* every JSONL file goes through :func:`json_lines`, which skips a bad line, counts
  it and goes on, and keeps what a corrupt gzip stream decoded before the error.
"""

from __future__ import annotations

import errno
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
MAX_DECOMPRESSED_BYTES = 64 * 2**20  # what a .gz file may decompress to; past it the file is refused
MAX_LINE_BYTES = 4 * 2**20  # one JSONL line (one episode; a long game with token log-probs is a few 100 KB)
MAX_JSON_FILE_BYTES = 8 * 2**20  # config.json, a tournament JSON
MAX_PARSE_BYTES = 128 * 2**20  # the estimated memory one parsed JSON text may take (see json_cost)
_CHUNK = 2**20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


class Refused(Exception):
    """A file the viewer will not read; the message says why (shown on the page)."""


@dataclass
class Skips:
    """What reading skipped: bad lines, files (or the rest of a file) that could not be read, and the
    files refused as a whole (a gzip that decompresses past the cap), whose episodes are not listed."""

    lines: int = 0
    files: dict[str, str] = field(default_factory=dict)  # file -> why
    refused: set[str] = field(default_factory=set)
    decompressed: int = 0  # bytes read after decompression (the scan's budget counts them)

    def add(self, other: Skips) -> None:
        self.lines += other.lines
        self.files.update(other.files)
        self.refused |= other.refused

    def __bool__(self) -> bool:
        return bool(self.lines or self.files)


def relative_parts(path: Path, root: Path) -> list[str]:
    """``path``'s components below ``root``, compared as written (``..`` folded), or :class:`Refused`.
    Nothing is resolved here: links are refused while opening, component by component."""
    p = Path(os.path.abspath(path))
    for base in (Path(os.path.abspath(root)), root.resolve()):
        if p == base:
            raise Refused("is the run folder itself")
        if base in p.parents:
            return list(p.relative_to(base).parts)
    raise Refused("leads outside the run folder")


def _check(fd: int, max_bytes: int, links_ok: bool = False) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise Refused("not a regular file")
    if st.st_nlink != 1 and not links_ok:
        raise Refused(f"has {st.st_nlink} hard links (a hard link may lead outside the run folder)")
    if st.st_size > max_bytes:
        raise Refused(f"larger than {_size(max_bytes)}")
    return st


def open_fd(path: Path, root: Path | None, max_bytes: int = MAX_FILE_BYTES) -> int:
    """A descriptor of ``path`` opened for reading, checked (see :func:`open_regular`), or :class:`Refused`."""
    if root is None:  # a file the person named on the command line: links allowed, still a regular file
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
        except OSError as e:
            raise Refused(f"cannot open: {e.strerror}") from None
        try:
            _check(fd, max_bytes, links_ok=True)
            os.set_blocking(fd, True)
            return fd
        except BaseException:
            os.close(fd)
            raise
    parts = relative_parts(path, root)
    try:
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)  # the run folder as named: may be a link
    except OSError as e:
        raise Refused(f"cannot open the run folder: {e.strerror}") from None
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | (os.O_NONBLOCK if last else _DIRECTORY)
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as e:  # ELOOP (or ENOTDIR): a link, never followed
                where = "/".join(parts[: i + 1])
                if e.errno == errno.ELOOP or (e.errno == errno.ENOTDIR and not last):
                    raise Refused(f"{where} is a link or not a folder (links are not followed)" if not last
                                  else f"{where} is a link (links are not followed)") from None
                raise Refused(f"cannot open {where}: {e.strerror}") from None
            os.close(fd)
            fd = nxt
        _check(fd, max_bytes)
        os.set_blocking(fd, True)  # a regular file: plain reads from here on
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: Path, root: Path | None, max_bytes: int = MAX_FILE_BYTES) -> IO[bytes]:
    """``path`` opened for binary reading, or :class:`Refused`.

    With ``root`` (the run folder), ``path`` must lie inside it as written, and is opened from the
    folder's descriptor one component at a time with ``O_NOFOLLOW`` (``O_DIRECTORY`` for folders), so
    a link at any component is refused, whenever it was put there. The file must be a regular file
    (never a FIFO, socket or device: opened ``O_NONBLOCK`` and checked with ``os.fstat``) with a single
    hard link, of at most ``max_bytes``. Without ``root`` (a file the person named), links are
    followed and the other checks stay."""
    return os.fdopen(open_fd(path, root, max_bytes), "rb")


def fingerprint(f: IO[bytes]) -> tuple[int, int, int, int]:
    """(device, inode, size, mtime in ns) of an open file: what a cache compares."""
    st = os.fstat(f.fileno())
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def append_line(path: Path, root: Path, text: str) -> None:
    """Append one line to ``path`` inside ``root`` (created if missing): its folders are walked as
    :func:`open_regular` walks them, and the file is never a link, FIFO or device (:class:`Refused`),
    so a hostile folder cannot make a write land elsewhere or block."""
    parts = relative_parts(path, root)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as e:
                raise Refused(f"cannot open the folder {name}: {e.strerror}") from None
            os.close(fd)
            fd = nxt
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
        try:
            out = os.open(parts[-1], flags, 0o644, dir_fd=fd)
        except OSError as e:  # ELOOP: a symlink; ENXIO: a FIFO nobody reads
            raise Refused(f"cannot open for writing: {e.strerror}") from None
    finally:
        os.close(fd)
    try:
        st = os.fstat(out)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise Refused("not a regular file with one link")
        os.set_blocking(out, True)
        data = (text.rstrip("\n") + "\n").encode("utf-8")
        while data:
            data = data[os.write(out, data):]
    finally:
        os.close(out)


def json_cost(data: bytes) -> int:
    """An upper estimate of the memory ``json.loads(data)`` takes: 64 bytes for every ``,``, ``:``,
    ``[`` and ``{`` (an empty dict is 64 bytes, a list 56, a float 24 plus its 8-byte slot, a dict
    entry about 40 plus its key) and four times the text (a string of one 4-byte character is stored
    at 4 bytes a character), so a text of many tiny values
    (``[{},{},...]``: 72 bytes per 3 in memory) is counted at about 47 times its length; measured
    shapes (dicts, lists, floats, ints, unique keys, tokens) take 50 to 95% of the estimate."""
    values = data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{") + 1
    return 4 * len(data) + 64 * values


def parse_json(data: bytes, max_cost: int = MAX_PARSE_BYTES) -> Any:
    """``json.loads(data)`` when :func:`json_cost` fits ``max_cost``; else :class:`Refused`."""
    cost = json_cost(data)
    if cost > max_cost:
        raise Refused(f"would take about {cost // 2**20} MiB of memory to parse (the cap is {_size(max_cost)})")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # ValueError: bad JSON or bad UTF-8
        raise Refused(f"not JSON: {e.__class__.__name__}") from None


def read_bytes(path: Path, root: Path | None, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """A whole (small) regular file; :class:`Refused` as :func:`open_regular`."""
    with open_regular(path, root, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise Refused(f"larger than {_size(max_bytes)}")
    return data


def read_json(path: Path, root: Path | None, max_bytes: int = MAX_JSON_FILE_BYTES) -> Any:
    """A JSON file of at most ``max_bytes`` whose parse fits :data:`MAX_PARSE_BYTES`; :class:`Refused`
    when it cannot be read or parsed (the message says why)."""
    return parse_json(read_bytes(path, root, max_bytes))


class _Counted:
    """A binary stream that counts what is read through it and stops past ``cap`` (:class:`Refused`)."""

    def __init__(self, f: IO[bytes], cap: int, what: str):
        self.f, self.cap, self.n, self.what = f, cap, 0, what

    def readline(self, limit: int) -> bytes:
        line = self.f.readline(limit)
        self.n += len(line)
        if self.n > self.cap:
            raise Refused(f"{self.what} more than {_size(self.cap)}: not read")
        return line


def _raw_lines(f: _Counted, max_line: int, skips: Skips) -> Iterator[bytes]:
    """Complete lines of ``f``; a line over ``max_line`` bytes is skipped (counted)."""
    while True:
        line = f.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line:
            skips.lines += 1
            while not line.endswith(b"\n"):  # discard the rest of the line
                line = f.readline(_CHUNK)
                if not line:
                    return
            continue
        yield line  # the last one may lack its newline: it is parsed all the same


def json_lines(path: Path, root: Path | None, skips: Skips, *, max_file: int = MAX_FILE_BYTES,
               max_decompressed: int = MAX_DECOMPRESSED_BYTES, max_line: int = MAX_LINE_BYTES,
               raw: IO[bytes] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON objects of a (gzip) JSONL file, one a line; anything else is skipped and counted in
    ``skips``: a line that is not JSON, not UTF-8, not an object, nested too deep, too long, or too
    costly to parse; a file that cannot be opened (see :func:`open_regular`); the rest of a gzip
    stream after an error (what decoded before it is kept). A gzip file that decompresses past
    ``max_decompressed`` is refused whole: it lands in ``skips.refused`` (the caller drops what it
    yielded). ``raw``: the file already opened (by :func:`open_regular`); it is closed here."""
    name = str(path)
    if raw is None:
        try:
            raw = open_regular(path, root, max_file)
        except Refused as e:
            skips.files[name] = str(e)
            return
    with raw:
        gz = path.suffix == ".gz"
        stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
        counted = _Counted(stream, *((max_decompressed, "decompresses to") if gz else (max_file, "grew to")))
        lines = _raw_lines(counted, max_line, skips)
        try:
            while True:
                try:
                    line = next(lines)
                except StopIteration:
                    return
                except Refused as e:
                    skips.files[name] = str(e)
                    skips.refused.add(name)
                    return
                except (OSError, EOFError, zlib.error) as e:  # corrupt or truncated gzip: keep what came before
                    skips.files[name] = f"unreadable after {e.__class__.__name__}: {e}"[:200]
                    return
                if not line.strip():
                    continue
                try:
                    obj = parse_json(line)
                except Refused:
                    skips.lines += 1
                    continue
                if isinstance(obj, dict):
                    yield obj
                else:
                    skips.lines += 1
        finally:
            skips.decompressed += counted.n


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
