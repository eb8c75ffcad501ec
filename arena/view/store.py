"""Reading a run folder for the viewer: episodes, metrics and tournament JSONs.

Episodes come from four places, each listed with a stable key ``<file>/<n>``, where
``<file>`` is the file's whole path inside the run folder (``episodes/step_000001.jsonl.gz``:
two files never share a key, whatever their names parse to) and ``<n>`` counts the
episodes read from it:
``episodes/step_*.jsonl.gz`` (what training saves, :mod:`arena.view.record`),
the run's ``runner.episodes_jsonl`` file when training saved no step files,
``evals/<name>/step_*.jsonl.gz`` (the held-out games of ``train.evals``, source
``eval:<name>``, never trained on) and ``play/episodes.jsonl`` (games played in the viewer). Files are re-read when
their size or modification time changes, so a run in progress shows its new
steps. Only a small summary of each episode stays in memory (its search text cut
at :data:`MAX_TEXT_CHARS`), in a cache of at most :data:`CACHE_BYTES` (estimated)
that drops deleted files and, past the cap, the least recently used; a page that
shows one episode reads its file again.

Files are listed without being opened (:mod:`arena.view.listing`): a listing in which
nothing changed opens no file and never waits for another listing, so 20,000 cached
files list in well under a second. Memory and time are bounded per request and per
process: a listing decompresses at most :data:`SCAN_BUDGET_BYTES` of changed files and
spends at most :data:`SCAN_CPU_S` seconds of CPU reading them (the rest is read by the
next request), and lists at most :data:`CACHE_BYTES` of summaries; ``metrics.jsonl`` is streamed,
at most :data:`MAX_METRICS_BYTES` of it per answer; JSON files are capped
(:mod:`arena.view.files`); at most :data:`READERS` requests read files at once.

Everything is read defensively (:mod:`arena.view.files`): only regular files inside
the run folder, within size caps; a line that is not a JSON object, or an episode
of an unexpected shape, is skipped and counted (the pages show the counts), a
tournament file of an unexpected shape is shown as it is, never a crash.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.view.files import (
    MAX_JSON_FILE_BYTES, MAX_READ_CPU_S, Gone, Refused, Skips, fingerprint, finite, json_lines, open_regular,
    parse_json, read_json,
)
from arena.view.listing import Listed, episode_files, tournament_files
MAX_TEXT_CHARS = 8192  # of an episode's search text kept in the list (completions, actions, info)
CACHE_BYTES = 128 * 2**20  # the episode summaries kept and listed (estimated, see row_bytes)
SCAN_BUDGET_BYTES = 512 * 2**20  # decompressed bytes one listing reads; what is left waits for the next
SCAN_CPU_S = 8.0  # CPU seconds one listing spends reading files; what is left waits for the next
MAX_METRICS_BYTES = 2 * 2**20  # of metrics.jsonl one /api/metrics answer reads (the page asks again)
MAX_METRICS_LINE = 2**20  # one line of metrics.jsonl
READERS = 2  # requests reading the run folder at once (each within the budgets above)


@dataclass
class Row:
    """One episode in the list: what the filters and the table need."""

    key: str
    step: int | None
    source: str
    episode_id: str
    game: str
    seed: int | None
    roles: dict[str, str]
    phases: list[str]
    outcome: str
    rewards: dict[str, float]
    turns: int
    invalid: int
    text: str = field(repr=False)

    @property
    def roles_text(self) -> str:
        """'spy: player_2 · civilian ×4': a role's seat when it has one, else its count."""
        by_role: dict[str, list[str]] = {}
        for seat, role in self.roles.items():
            by_role.setdefault(role, []).append(seat)
        return " · ".join(f"{r}: {s[0]}" if len(s) == 1 else f"{r} ×{len(s)}" for r, s in by_role.items())

    @property
    def rewards_text(self) -> str:
        return ", ".join(f"{v:.2f}" for v in self.rewards.values())


def outcome_label(ep: dict[str, Any]) -> str:
    """'won: <roles of the rank-1 seats>', 'draw' when every seat ranks first, 'truncated', or '-'."""
    if ep.get("truncated"):
        return "truncated"
    outcome = ep.get("outcome") or {}
    if not isinstance(outcome, dict) or not outcome:
        return "-"
    best = [s for s, o in outcome.items() if isinstance(o, dict) and o.get("rank") == 1]
    if len(best) == len(outcome):
        return "draw"
    roles = ep.get("roles") or {}
    return "won: " + ", ".join(sorted({str(roles.get(s, s)) for s in best}))


def summarise(key: str, step: int | None, source: str, ep: dict[str, Any]) -> Row:
    turns = [t for t in ep.get("turns") or [] if isinstance(t, dict)]
    text = " ".join(
        str(t.get(k) or "") for t in turns for k in ("completion", "action", "invalid_reason")
    ) + " " + json.dumps(ep.get("info") or {}) + " " + str(ep.get("episode_id", ""))
    return Row(
        key=key, step=step, source=source, episode_id=str(ep.get("episode_id", key)), game=str(ep.get("game", "?")),
        seed=ep.get("seed"), roles={str(k): str(v) for k, v in (ep.get("roles") or {}).items()},
        phases=list(dict.fromkeys(str(t.get("phase", "")) for t in turns)), outcome=outcome_label(ep),
        rewards={str(k): float(v) for k, v in (ep.get("rewards") or {}).items() if isinstance(v, int | float)},
        turns=len(turns), invalid=sum(not t.get("valid", True) for t in turns), text=text[:MAX_TEXT_CHARS].lower(),
    )


def row_bytes(row: Row) -> int:
    """About what a row takes in memory: the object, its strings and its small dicts."""
    strings = len(row.text) + len(row.episode_id) + len(row.game) + len(row.key)
    return 800 + strings + 150 * (len(row.roles) + len(row.rewards) + len(row.phases))


@dataclass
class _Entry:
    """A file's summaries, as read at ``sig`` (device, inode, size, mtime)."""

    sig: tuple[int, int, int, int]
    rows: list[Row]
    skips: Skips
    nbytes: int


class RunStore:
    """The run folder's episodes, metrics and tournaments, re-read as they change."""

    def __init__(self, run_dir: Path, tournaments: list[Path] | None = None, *, cache_bytes: int = CACHE_BYTES,
                 scan_budget: int = SCAN_BUDGET_BYTES, scan_cpu_s: float = SCAN_CPU_S,
                 read_cpu_s: float = MAX_READ_CPU_S, metrics_bytes: int = MAX_METRICS_BYTES):
        self.run_dir = run_dir
        self.extra_tournaments = list(tournaments or [])
        self.cache_bytes, self.scan_budget, self.metrics_bytes = cache_bytes, scan_budget, metrics_bytes
        self.scan_cpu_s, self.read_cpu_s = scan_cpu_s, read_cpu_s
        self._cache: OrderedDict[str, _Entry] = OrderedDict()  # file key -> summaries, least recently used first
        self.cached_bytes = 0
        self._lock = threading.Lock()  # the cache, held for moments only
        self._reading = threading.Lock()  # one listing reads changed files at a time; the others wait only if
        # they too have something to read
        self._readers = threading.BoundedSemaphore(READERS)
        self._config: tuple[tuple[int, int, int, int], dict[str, Any]] | None = None
        self._offsets: OrderedDict[tuple[int, int, int], int] = OrderedDict()  # (dev, ino, line) -> byte offset
        self._offsets_lock = threading.Lock()

    # ----------------------------------------------------------------- files
    def config(self) -> dict[str, Any]:
        """config.json (at most MAX_JSON_FILE_BYTES), parsed once per change; {} when unreadable."""
        try:
            f = open_regular(self.run_dir / "config.json", self.run_dir, MAX_JSON_FILE_BYTES)
        except Refused:
            return {}
        with f:
            sig = fingerprint(f)
            if self._config is not None and self._config[0] == sig:
                return self._config[1]
            data = f.read(MAX_JSON_FILE_BYTES + 1)
        try:
            raw = parse_json(data) if len(data) <= MAX_JSON_FILE_BYTES else None
        except Refused:
            raw = None
        cfg = raw if isinstance(raw, dict) else {}
        self._config = (sig, cfg)
        return cfg

    def _read(self, f: Listed, skips: Skips, raw: Any = None) -> Any:
        """(index, row, episode) of each episode of a file that summarises cleanly; the rest is counted."""
        i = 0
        for ep in json_lines(f.path, self.run_dir, skips, raw=raw, max_cpu_s=self.read_cpu_s):
            try:
                row = summarise(f"{f.key}/{i}", f.step, f.source, ep)
            except Exception:  # noqa: BLE001 - an episode of an odd shape: skipped and counted, never a 500
                skips.lines += 1
                continue
            yield i, row, ep
            i += 1

    def _put(self, name: str, entry: _Entry) -> None:
        self._drop(name)
        self._cache[name] = entry
        self.cached_bytes += entry.nbytes
        while self.cached_bytes > self.cache_bytes and len(self._cache) > 1:  # least recently used first
            self._drop(next(iter(self._cache)))

    def _drop(self, name: str) -> None:
        old = self._cache.pop(name, None)
        if old is not None:
            self.cached_bytes -= old.nbytes

    def episode_files(self) -> list[Listed]:
        """The episode files, in display order (:func:`arena.view.listing.episode_files`)."""
        return episode_files(self.run_dir, self.config())

    def scan(self) -> tuple[list[Row], Skips]:
        """Every episode's summary, re-reading files that changed, and what was skipped. Files gone
        from the folder leave the cache; a file refused whole lists no episode; past the listing's
        budgets (decompressed bytes and CPU seconds read, summaries listed) the rest of the files say
        so instead. A listing in which no file changed opens none and never waits for another
        listing; one that has files to read reads them one listing at a time. :class:`Gone` when
        the run folder itself is gone."""
        total = Skips()
        files = self.episode_files()
        current: dict[str, _Entry] = {}  # key -> its entry, current with the file on disk
        stale: list[Listed] = []
        with self._lock:
            present = {f.key for f in files}
            for gone in [k for k in self._cache if k not in present]:
                self._drop(gone)
            get = self._cache.get
            for f in files:
                entry = get(f.key)
                if f.sig is not None and entry is not None and entry.sig == f.sig:
                    current[f.key] = entry
                elif f.error is None:
                    stale.append(f)
        if stale:
            with self._reading, self._readers:
                self._read_changed(stale, current, total)
        return self._assemble(files, current, total)

    def _read_changed(self, stale: list[Listed], current: dict[str, _Entry], total: Skips) -> None:
        """Open and read the files that changed, within the listing's budgets, into the cache and
        ``current``."""
        read, start = 0, time.thread_time()
        for f in stale:
            try:
                raw = open_regular(f.path, self.run_dir)
            except Refused as e:  # a link, a FIFO, a file gone since the listing
                total.files[str(f.path)] = str(e)
                with self._lock:
                    self._drop(f.key)
                continue
            sig = fingerprint(raw)
            entry = self._cache.get(f.key)
            if entry is not None and entry.sig == sig:  # read by the listing this one waited for
                raw.close()
                current[f.key] = entry
                continue
            spent = time.thread_time() - start
            if read >= self.scan_budget or spent >= self.scan_cpu_s:
                raw.close()
                total.files[str(f.path)] = (f"not read yet: this listing already decompressed {read // 2**20} MiB "
                                            f"in {spent:.1f} s of CPU; reload the page to read on")
                continue
            skips = Skips()
            rows = [row for _, row, _ in self._read(f, skips, raw=raw)]
            read += skips.decompressed
            if skips.refused:  # not read at all: neither its episodes nor its bad lines count
                rows, skips.lines = [], 0
            current[f.key] = entry = _Entry(sig, rows, skips, sum(map(row_bytes, rows)) + 1000)
            with self._lock:
                self._put(f.key, entry)

    def _assemble(self, files: list[Listed], current: dict[str, _Entry], total: Skips) -> tuple[list[Row], Skips]:
        """The rows of the current files in listing order, within the listing's cap of summaries."""
        out: list[Row] = []
        listed = 0
        with self._lock:
            cache = self._cache
            for f in files:
                if f.error is not None:
                    total.files[str(f.path)] = f.error
                    continue
                entry = current.get(f.key)
                if entry is None:
                    continue  # refused at its opening, or not read yet: said so already
                if f.key in cache:
                    cache.move_to_end(f.key)
                if listed + entry.nbytes > self.cache_bytes:
                    total.files[str(f.path)] = f"not listed: the episodes listed already take {listed // 2**20} MiB"
                    continue
                listed += entry.nbytes
                out.extend(entry.rows)
                if entry.skips.lines or entry.skips.files:
                    total.add(entry.skips)
        return out, total

    def rows(self) -> list[Row]:
        """Every episode's summary (see :meth:`scan`)."""
        return self.scan()[0]

    def episode(self, key: str) -> tuple[Row, dict[str, Any]] | None:
        """One episode by its key, read from its file; None for a key that names none; :class:`Refused`
        when its file is refused whole (a gzip that decompresses past the cap, or reads too long)."""
        name, _, line = key.rpartition("/")
        if not (line.isascii() and line.isdigit()) or len(line) > 18:
            return None
        want = int(line)
        try:
            f = next(f for f in self.episode_files() if f.key == name)
        except (StopIteration, Gone):
            return None
        entry = self._cache.get(name)
        if f.error is not None:
            return None
        if entry is not None and entry.skips.refused:
            raise Refused(entry.skips.files.get(str(f.path), "refused"))
        skips = Skips()
        with self._readers:
            for i, row, ep in self._read(f, skips):
                if i == want:
                    return row, ep
        if skips.refused:
            raise Refused(skips.files.get(str(f.path), "refused"))
        return None

    # ----------------------------------------------------------------- metrics
    def metrics(self, since: int = 0) -> tuple[list[dict[str, Any]], int, int, bool]:
        """Rows of metrics.jsonl from line ``since`` on, streamed: at most ``metrics_bytes`` of lines
        (complete lines only) per call. Returns the rows, the line after the last one read, how many
        of the lines read were skipped (not UTF-8, not a JSON object, too long), and whether more
        lines follow (ask again from the returned line). NaN and infinities become None."""
        with self._readers:
            try:
                f = open_regular(self.run_dir / "metrics.jsonl", self.run_dir)
            except Refused:
                return [], 0, 0, False
            with f:
                return self._metrics(f, since)

    def _metrics(self, f: Any, since: int) -> tuple[list[dict[str, Any]], int, int, bool]:
        dev, ino, size, _ = fingerprint(f)
        line_no, pos = 0, 0
        with self._offsets_lock:
            known = list(self._offsets.items())
        for (d, i, n), off in known:  # resume from the nearest line already found
            if (d, i) == (dev, ino) and line_no < n <= since and off <= size:
                line_no, pos = n, off
        if pos:
            f.seek(pos - 1)
            if f.read(1) != b"\n":  # rewritten since: count from the start
                line_no, pos = 0, 0
        f.seek(pos)
        while line_no < since:  # skip to line ``since``, a bounded piece at a time
            piece = f.readline(MAX_METRICS_LINE)
            if piece.endswith(b"\n"):
                line_no += 1
            elif len(piece) < MAX_METRICS_LINE:  # the end, or a line still being written
                return [], line_no, 0, False
            pos += len(piece)
        rows, skipped, read, more, end = [], 0, 0, False, pos
        while True:
            if read >= self.metrics_bytes:
                more = True
                break
            piece = f.readline(MAX_METRICS_LINE + 1)
            if not piece.endswith(b"\n"):
                if len(piece) <= MAX_METRICS_LINE:
                    break  # the end, or a line still being written
                while piece and not piece.endswith(b"\n"):  # a line too long: skipped
                    read += len(piece)
                    piece = f.readline(MAX_METRICS_LINE)
                if not piece:
                    break
                skipped += 1
            elif piece.strip():
                try:
                    row = parse_json(piece)
                except Refused:
                    row = None
                if isinstance(row, dict):
                    rows.append(finite(row))
                else:
                    skipped += 1
            read += len(piece)
            line_no += 1
            end = pos + read
        with self._offsets_lock:
            self._offsets[(dev, ino, line_no)] = end
            while len(self._offsets) > 64:
                self._offsets.popitem(last=False)
        return rows, line_no, skipped, more

    # ----------------------------------------------------------------- tournaments
    def tournament_files(self) -> list[Listed]:
        """The tournament JSONs (:func:`arena.view.listing.tournament_files`); :class:`Gone` as :meth:`scan`."""
        return tournament_files(self.run_dir, self.extra_tournaments)

    def tournament(self, f: Listed) -> Any:
        """One tournament file's JSON, or ``{"error": why}``: parsed one at a time, so a page of many
        holds one in memory (a file named on the command line may lie anywhere; the run folder's
        stay inside it)."""
        if f.error is not None:
            return {"error": f"cannot read: {f.error}"}
        try:
            with self._readers:
                return read_json(f.path, None if f.path in self.extra_tournaments else self.run_dir)
        except Refused as e:
            return {"error": f"cannot read: {e}"}
