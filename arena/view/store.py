"""Reading a run folder for the viewer: episodes, metrics and tournament JSONs.

Episodes come from four places, each listed with a stable key ``<file>/<line>``:
``episodes/step_*.jsonl.gz`` (what training saves, :mod:`arena.view.record`),
the run's ``runner.episodes_jsonl`` file when training saved no step files,
``evals/<name>/step_*.jsonl.gz`` (the held-out games of ``train.evals``, source
``eval:<name>``, never trained on) and ``play/episodes.jsonl`` (games played in the viewer). Files are re-read when
their size or modification time changes, so a run in progress shows its new
steps. Only a small summary of each episode stays in memory; a page that shows
one episode reads its file again.

Everything is read defensively (:mod:`arena.view.files`): only regular files inside
the run folder, within size caps; a line that is not a JSON object, or an episode
of an unexpected shape, is skipped and counted (the pages show the counts), a
tournament file of an unexpected shape is shown as it is, never a crash.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.view.files import Refused, Skips, finite, json_lines, read_bytes, read_json
from arena.view.record import EPISODES_DIR

PLAY_FILE = Path("play") / "episodes.jsonl"
EVALS_DIR = "evals"  # arena/loop/evals.py writes <run_dir>/evals/<name>/step_S.jsonl.gz
_STEP = re.compile(r"step_(\d{1,18})", re.ASCII)


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
        turns=len(turns), invalid=sum(not t.get("valid", True) for t in turns), text=text.lower(),
    )


class RunStore:
    """The run folder's episodes, metrics and tournaments, re-read as they change."""

    def __init__(self, run_dir: Path, tournaments: list[Path] | None = None):
        self.run_dir = run_dir
        self.extra_tournaments = list(tournaments or [])
        self._files: dict[Path, tuple[tuple[float, int], list[Row], Skips]] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- files
    def config(self) -> dict[str, Any]:
        try:
            raw = read_json(self.run_dir / "config.json", self.run_dir)
        except Refused:
            return {}
        return raw if isinstance(raw, dict) else {}

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

    @staticmethod
    def _name(path: Path, source: str) -> str:
        """The key's file part: unique in the run and free of "/" (an eval's steps repeat training's)."""
        if source == "play":
            return "play"
        stem = path.name.split(".")[0]
        return f"eval-{path.parent.name}-{stem}" if source.startswith("eval:") else stem

    def _read(self, path: Path, step: int | None, source: str, skips: Skips) -> Any:
        """(index, row, episode) of each episode of a file that summarises cleanly; the rest is counted."""
        name = self._name(path, source)
        i = 0
        for ep in json_lines(path, self.run_dir, skips):
            try:
                row = summarise(f"{name}/{i}", step, source, ep)
            except Exception:  # noqa: BLE001 - an episode of an odd shape: skipped and counted, never a 500
                skips.lines += 1
                continue
            yield i, row, ep
            i += 1

    def scan(self) -> tuple[list[Row], Skips]:
        """Every episode's summary, re-reading files that changed, and what was skipped."""
        out: list[Row] = []
        total = Skips()
        with self._lock:
            for path, step, source in self.episode_files():
                try:
                    st = path.stat()
                except OSError as e:  # a dangling link, a file gone since the listing
                    total.files[str(path)] = f"cannot stat: {e.strerror}"
                    continue
                sig = (st.st_mtime, st.st_size)
                cached = self._files.get(path)
                if cached is None or cached[0] != sig:
                    skips = Skips()
                    rows = [row for _, row, _ in self._read(path, step, source, skips)]
                    cached = (sig, rows, skips)
                    self._files[path] = cached
                out.extend(cached[1])
                total.add(cached[2])
        return out, total

    def rows(self) -> list[Row]:
        """Every episode's summary (see :meth:`scan`)."""
        return self.scan()[0]

    def episode(self, key: str) -> tuple[Row, dict[str, Any]] | None:
        """One episode by its key, read from its file; None for a key that names none."""
        name, _, line = key.partition("/")
        if not (line.isascii() and line.isdigit()) or len(line) > 18:
            return None
        want = int(line)
        for path, step, source in self.episode_files():
            if self._name(path, source) == name:
                for i, row, ep in self._read(path, step, source, Skips()):
                    if i == want:
                        return row, ep
                return None
        return None

    # ----------------------------------------------------------------- metrics
    def metrics(self, since: int = 0) -> tuple[list[dict[str, Any]], int, int]:
        """Rows of metrics.jsonl from line ``since`` on, the line count read (complete lines only) and
        how many of those lines were skipped (not UTF-8, not a JSON object). NaN and infinities
        become None, so the rows are valid JSON."""
        try:
            data = read_bytes(self.run_dir / "metrics.jsonl", self.run_dir)
        except Refused:
            return [], 0, 0
        lines = data.split(b"\n")[:-1]  # the last piece is empty or a line still being written
        rows, skipped = [], 0
        for line in lines[since:]:
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):  # ValueError: bad JSON or bad UTF-8
                skipped += 1
                continue
            if isinstance(row, dict):
                rows.append(finite(row))
            else:
                skipped += 1
        return rows, len(lines), skipped

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
                data = read_json(p, None if p in extra else self.run_dir)
            except Refused as e:
                out.append((p, {"error": f"cannot read: {e}"}))
                continue
            out.append((p, data))
        return out
