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

Memory is bounded per request and per process: a listing decompresses at most
:data:`SCAN_BUDGET_BYTES` of changed files (the rest is read by the next request)
and lists at most :data:`CACHE_BYTES` of summaries; ``metrics.jsonl`` is streamed,
at most :data:`MAX_METRICS_BYTES` of it per answer; JSON files are capped
(:mod:`arena.view.files`); at most :data:`READERS` requests read files at once.

Everything is read defensively (:mod:`arena.view.files`): only regular files inside
the run folder, within size caps; a line that is not a JSON object, or an episode
of an unexpected shape, is skipped and counted (the pages show the counts), a
tournament file of an unexpected shape is shown as it is, never a crash.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.view.files import (
    MAX_JSON_FILE_BYTES, Refused, Skips, fingerprint, finite, json_lines, open_regular, parse_json, read_json,
    relative_parts,
)
from arena.view.record import EPISODES_DIR

PLAY_FILE = Path("play") / "episodes.jsonl"
EVALS_DIR = "evals"  # arena/loop/evals.py writes <run_dir>/evals/<name>/step_S.jsonl.gz
_STEP = re.compile(r"step_(\d{1,18})", re.ASCII)
MAX_TEXT_CHARS = 8192  # of an episode's search text kept in the list (completions, actions, info)
CACHE_BYTES = 128 * 2**20  # the episode summaries kept and listed (estimated, see row_bytes)
SCAN_BUDGET_BYTES = 512 * 2**20  # decompressed bytes one listing reads; what is left waits for the next
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
                 scan_budget: int = SCAN_BUDGET_BYTES, metrics_bytes: int = MAX_METRICS_BYTES):
        self.run_dir = run_dir
        self.extra_tournaments = list(tournaments or [])
        self.cache_bytes, self.scan_budget, self.metrics_bytes = cache_bytes, scan_budget, metrics_bytes
        self._cache: OrderedDict[str, _Entry] = OrderedDict()  # file key -> summaries, least recently used first
        self.cached_bytes = 0
        self._lock = threading.Lock()  # one listing at a time (it fills the cache)
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

    def episode_files(self) -> list[tuple[Path, int | None, str]]:
        """(file, step, source) in display order: training steps, then the runner's log, then play."""
        files: list[tuple[Path, int | None, str]] = []
        for p in sorted((self.run_dir / EPISODES_DIR).glob("step_*.jsonl.gz")):
            m = _STEP.search(p.name)
            files.append((p, int(m.group(1)) if m else None, "train"))
        if not files:
            log = (self.config().get("runner") or {}).get("episodes_jsonl")
            if isinstance(log, str) and log:
                path = Path(log) if Path(log).is_absolute() else self.run_dir / log
                if not path.exists():
                    path = Path(log)  # relative to where training ran; read only if inside the run folder
                if path.exists():
                    files.append((path, None, "log"))
        for p in sorted((self.run_dir / EVALS_DIR).glob("*/step_*.jsonl*")):
            m = _STEP.search(p.name)
            files.append((p, int(m.group(1)) if m else None, f"eval:{p.parent.name}"))
        play = self.run_dir / PLAY_FILE
        if play.exists():
            files.append((play, None, "play"))
        return files

    def file_key(self, path: Path) -> str:
        """The key's file part: the file's whole path inside the run folder (unique; the key's
        last "/" separates the episode number), or the path as written when it lies outside."""
        try:
            return "/".join(relative_parts(path, self.run_dir))
        except Refused:
            return str(path)

    def _read(self, path: Path, step: int | None, source: str, skips: Skips, raw: Any = None) -> Any:
        """(index, row, episode) of each episode of a file that summarises cleanly; the rest is counted."""
        name = self.file_key(path)
        i = 0
        for ep in json_lines(path, self.run_dir, skips, raw=raw):
            try:
                row = summarise(f"{name}/{i}", step, source, ep)
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

    def scan(self) -> tuple[list[Row], Skips]:
        """Every episode's summary, re-reading files that changed, and what was skipped. Files gone
        from the folder leave the cache; a file refused whole lists no episode; past the listing's
        budgets (decompressed bytes read, summaries listed) the rest of the files say so instead."""
        out: list[Row] = []
        total = Skips()
        read = listed = 0
        with self._lock, self._readers:
            files = self.episode_files()
            present = {self.file_key(p) for p, _, _ in files}
            for gone in [k for k in self._cache if k not in present]:
                self._drop(gone)
            for path, step, source in files:
                name = self.file_key(path)
                try:
                    f = open_regular(path, self.run_dir)
                except Refused as e:  # a link, a FIFO, a file gone since the listing
                    total.files[str(path)] = str(e)
                    self._drop(name)
                    continue
                sig = fingerprint(f)
                entry = self._cache.get(name)
                if entry is not None and entry.sig == sig:
                    f.close()
                    self._cache.move_to_end(name)
                elif read >= self.scan_budget:
                    f.close()
                    total.files[str(path)] = (f"not read yet: this listing already decompressed "
                                              f"{read // 2**20} MiB; reload the page to read on")
                    continue
                else:
                    skips = Skips()
                    rows = [row for _, row, _ in self._read(path, step, source, skips, raw=f)]
                    read += skips.decompressed
                    if skips.refused:  # not read at all: neither its episodes nor its bad lines count
                        rows, skips.lines = [], 0
                    entry = _Entry(sig, rows, skips, sum(map(row_bytes, rows)) + 1000)
                    self._put(name, entry)
                if listed + entry.nbytes > self.cache_bytes:
                    total.files[str(path)] = f"not listed: the episodes listed already take {listed // 2**20} MiB"
                    continue
                listed += entry.nbytes
                out.extend(entry.rows)
                total.add(entry.skips)
        return out, total

    def rows(self) -> list[Row]:
        """Every episode's summary (see :meth:`scan`)."""
        return self.scan()[0]

    def episode(self, key: str) -> tuple[Row, dict[str, Any]] | None:
        """One episode by its key, read from its file; None for a key that names none; :class:`Refused`
        when its file is refused whole (a gzip that decompresses past the cap)."""
        name, _, line = key.rpartition("/")
        if not (line.isascii() and line.isdigit()) or len(line) > 18:
            return None
        want = int(line)
        for path, step, source in self.episode_files():
            if self.file_key(path) != name:
                continue
            entry = self._cache.get(name)
            if entry is not None and entry.skips.refused:
                raise Refused(entry.skips.files.get(str(path), "refused"))
            skips = Skips()
            with self._readers:
                for i, row, ep in self._read(path, step, source, skips):
                    if i == want:
                        return row, ep
            if skips.refused:
                raise Refused(skips.files.get(str(path), "refused"))
            return None
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
    def tournament_files(self) -> list[Path]:
        found = [*self.extra_tournaments]
        for pattern in ("*.json", "tournament*/*.json", "tournaments/*/*.json"):
            found += [p for p in sorted(self.run_dir.glob(pattern)) if p.name != "config.json"]
        return list(dict.fromkeys(found))

    def tournaments(self) -> list[tuple[Path, Any]]:
        out = []
        extra = set(self.extra_tournaments)
        for p in self.tournament_files():
            try:  # a file named on the command line may lie anywhere; the run folder's stay inside it
                with self._readers:
                    data = read_json(p, None if p in extra else self.run_dir)
            except Refused as e:
                out.append((p, {"error": f"cannot read: {e}"}))
                continue
            out.append((p, data))
        return out
