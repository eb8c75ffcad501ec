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
* a gzip file may decompress to at most :data:`MAX_DECOMPRESSED_BYTES`, and reading a file
  (decompressing, splitting, parsing) may take at most :data:`MAX_READ_CPU_S` seconds of CPU; past
  either the file is refused as a whole (:attr:`Skips.refused`), never half shown;
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
import re
import stat
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

MAX_FILE_BYTES = 256 * 2**20  # a file's size on disk
MAX_DECOMPRESSED_BYTES = 64 * 2**20  # what a .gz file may decompress to; past it the file is refused
MAX_LINE_BYTES = 4 * 2**20  # one JSONL line (one episode; a long game with token log-probs is a few 100 KB)
MAX_JSON_FILE_BYTES = 8 * 2**20  # config.json, a tournament JSON
MAX_PARSE_BYTES = 128 * 2**20  # the estimated memory one parsed JSON text may take (see json_cost)
MAX_READ_CPU_S = 4.0  # CPU seconds reading one JSONL file may take (a genuine 64 MiB step file: under 1 s)
_CHUNK = 2**20
_CHECK_LINES = 256  # lines between two looks at the CPU clock
_BLANKS = re.compile(rb"\n[ \t\r\n]*")  # a newline and the blank lines after it (anchored at a newline: linear)
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
    for resolved in (False, True):  # resolved only when the path does not lie below the folder as written
        base = root.resolve() if resolved else Path(os.path.abspath(root))
        if p == base:
            raise Refused("is the run folder itself")
        if base in p.parents:
            return list(p.relative_to(base).parts)
    raise Refused("leads outside the run folder")


def refusal(st: os.stat_result, where: str, max_bytes: int = MAX_FILE_BYTES, links_ok: bool = False) -> str | None:
    """Why a file of this (l)stat is not read (a link, not a regular file, hard links, too large), or None."""
    if stat.S_ISLNK(st.st_mode):
        return f"{where} is a link (links are not followed)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink != 1 and not links_ok:
        return f"has {st.st_nlink} hard links (a hard link may lead outside the run folder)"
    if st.st_size > max_bytes:
        return f"larger than {_size(max_bytes)}"
    return None


def _check(fd: int, max_bytes: int, links_ok: bool = False) -> os.stat_result:
    st = os.fstat(fd)
    why = refusal(st, "", max_bytes, links_ok)
    if why is not None:
        raise Refused(why)
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


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """(device, inode, size, mtime in ns): what a cache compares."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def fingerprint(f: IO[bytes]) -> tuple[int, int, int, int]:
    """:func:`signature` of an open file."""
    return signature(os.fstat(f.fileno()))


class Gone(Exception):
    """The run folder itself cannot be opened any more (deleted or renamed while the viewer runs)."""


def open_folder(root: Path) -> int:
    """A descriptor of the run folder (as named: it may be a link), or :class:`Gone`."""
    try:
        return os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as e:
        raise Gone(f"the run folder {str(root)!r} cannot be opened: {e.strerror}") from None


def list_folder(fd: int, parts: Sequence[str] = ()) -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of each entry of the folder ``parts`` below the folder open as ``fd``, sorted by
    name; the folders on the way are opened as :func:`open_regular` opens them (a link is never
    followed). Empty when that folder is missing, a link, not a folder, or vanished meanwhile (so a
    folder deleted during a listing lists nothing). One ``scandir`` and one ``lstat`` an entry: no
    file is opened, so listing 20,000 files takes a fraction of a second."""
    own = fd
    try:
        for name in parts:
            nxt = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=own)
            if own != fd:
                os.close(own)
            own = nxt
        found = []
        with os.scandir(own) as entries:
            for entry in entries:
                try:
                    found.append((entry.name, entry.stat(follow_symlinks=False)))
                except OSError:  # gone since the folder was read
                    continue
        return sorted(found, key=lambda x: x[0])
    except OSError:
        return []
    finally:
        if own != fd:
            os.close(own)


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
    """A binary stream read a piece at a time (``read1``: what one step of decompression gives, so a
    corrupt stream loses little), counting what is read and the CPU time its reader spends: past
    ``cap`` bytes, or past ``max_cpu_s`` seconds of this thread's CPU since the first read, it stops
    (:class:`Refused`). :meth:`tick` is called for each line, so the CPU is checked every
    :data:`_CHECK_LINES` lines or :data:`_CHUNK` bytes (a clock read costs about a microsecond)."""

    def __init__(self, f: IO[bytes], cap: int, what: str, max_cpu_s: float):
        self.f, self.cap, self.n, self.what, self.max_cpu_s = f, cap, 0, what, max_cpu_s
        self.start = time.thread_time()
        self._lines = self._bytes = 0

    def read(self) -> bytes:
        piece = self.f.read1(_CHUNK)  # type: ignore[attr-defined]
        self.n += len(piece)
        if self.n > self.cap:
            raise Refused(f"{self.what} more than {_size(self.cap)}: not read")
        self._bytes += len(piece)
        self.tick(0)
        return piece

    def tick(self, nbytes: int) -> None:
        self._lines += 1
        self._bytes += nbytes
        if self._lines < _CHECK_LINES and self._bytes < _CHUNK:
            return
        self._lines = self._bytes = 0
        if time.thread_time() - self.start > self.max_cpu_s:
            raise Refused(f"took more than {self.max_cpu_s:g} s of CPU to read (decompress, split and parse): "
                          f"not read")


def _raw_lines(f: _Counted, max_line: int, skips: Skips) -> Iterator[bytes]:
    """The non-blank lines of ``f``, stripped; a line over ``max_line`` bytes is skipped (counted).

    Lines are cut from pieces of the stream with ``bytes.split``, and runs of blank lines are folded
    by one regular expression (:data:`_BLANKS`) first, so a file of millions of blank lines costs what
    its bytes cost, not a Python step a line (a 62 KiB gzip of newlines held a listing for 95 s)."""
    pending = b""  # the start of a line whose newline has not come yet
    dropping = False  # inside a line too long, until its newline
    while True:
        piece = f.read()
        if not piece:
            if pending.strip() and not dropping:
                yield pending.strip()  # the last line may lack its newline: parsed all the same
            return
        if dropping:
            cut = piece.find(b"\n")
            if cut < 0:
                continue
            piece, dropping = piece[cut + 1 :], False
        cut = piece.rfind(b"\n")
        if cut < 0:
            pending += piece
        else:
            lines = _BLANKS.sub(b"\n", pending + piece[:cut]).split(b"\n")
            pending = piece[cut + 1 :]
            for line in lines:
                if len(line) > max_line:
                    skips.lines += 1
                    continue
                line = line.strip()
                if line:
                    yield line
        if len(pending) > max_line:
            skips.lines += 1
            pending, dropping = b"", True


def json_lines(path: Path, root: Path | None, skips: Skips, *, max_file: int = MAX_FILE_BYTES,
               max_decompressed: int = MAX_DECOMPRESSED_BYTES, max_line: int = MAX_LINE_BYTES,
               max_cpu_s: float = MAX_READ_CPU_S, raw: IO[bytes] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON objects of a (gzip) JSONL file, one a line; anything else is skipped and counted in
    ``skips``: a line that is not JSON, not UTF-8, not an object, nested too deep, too long, or too
    costly to parse; a file that cannot be opened (see :func:`open_regular`); the rest of a gzip
    stream after an error (what decoded before it is kept). A gzip file that decompresses past
    ``max_decompressed``, or whose reading takes more than ``max_cpu_s`` seconds of this thread's CPU
    (what the caller does with each object between two reads included), is refused whole: it lands in
    ``skips.refused`` (the caller drops what it yielded). ``raw``: the file already opened (by
    :func:`open_regular`); it is closed here."""
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
        counted = _Counted(stream, *((max_decompressed, "decompresses to") if gz else (max_file, "grew to")),
                           max_cpu_s=max_cpu_s)
        lines = _raw_lines(counted, max_line, skips)
        try:
            while True:
                try:
                    line = next(lines)
                    counted.tick(len(line))
                except StopIteration:
                    return
                except Refused as e:
                    skips.files[name] = str(e)
                    skips.refused.add(name)
                    return
                except (OSError, EOFError, zlib.error) as e:  # corrupt or truncated gzip: keep what came before
                    skips.files[name] = f"unreadable after {e.__class__.__name__}: {e}"[:200]
                    return
                if not line.startswith(b"{"):  # no JSON object: skipped without a parse
                    skips.lines += 1
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
