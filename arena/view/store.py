"""Reading a run folder for the viewer: episodes, metrics and tournament JSONs.

Episodes come from four places, each listed with a stable key ``<file>/<line>``:
``episodes/step_*.jsonl.gz`` (what training saves, :mod:`arena.view.record`),
the run's ``runner.episodes_jsonl`` file when training saved no step files,
``evals/<name>/step_*.jsonl.gz`` (the held-out games of ``train.evals``, source
``eval:<name>``, never trained on) and ``play/episodes.jsonl`` (games played in the viewer). Files are re-read when
their size or modification time changes, so a run in progress shows its new
steps. Only a small summary of each episode stays in memory; a page that shows
one episode reads its file again.

Everything is read defensively: a line that is not JSON, or a tournament file
of an unexpected shape, is skipped or shown as it is, never a crash.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.view.record import EPISODES_DIR, read_step_file

PLAY_FILE = Path("play") / "episodes.jsonl"
EVALS_DIR = "evals"  # arena/loop/evals.py writes <run_dir>/evals/<name>/step_S.jsonl.gz
_STEP = re.compile(r"step_(\d+)")


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


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """Episode dicts of a (gzip) JSONL file; a plain file's unreadable lines are skipped."""
    out = []
    try:
        it = read_step_file(path) if path.suffix == ".gz" else _plain(path)
        for ep in it:
            out.append(ep)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError):
        pass  # a file being written: what was read so far is shown; the next refresh reads the rest
    return out


def _plain(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                ep = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(ep, dict):
                yield ep


class RunStore:
    """The run folder's episodes, metrics and tournaments, re-read as they change."""

    def __init__(self, run_dir: Path, tournaments: list[Path] | None = None):
        self.run_dir = run_dir
        self.extra_tournaments = list(tournaments or [])
        self._files: dict[Path, tuple[tuple[float, int], list[Row]]] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- files
    def config(self) -> dict[str, Any]:
        try:
            raw = json.loads((self.run_dir / "config.json").read_text())
            return raw if isinstance(raw, dict) else {}
        except (OSError, json.JSONDecodeError):
            return {}

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
                    path = Path(log)
                if path.is_file():
                    files.append((path, None, "log"))
        for p in sorted((self.run_dir / EVALS_DIR).glob("*/step_*.jsonl*")):
            m = _STEP.search(p.name)
            files.append((p, int(m.group(1)) if m else None, f"eval:{p.parent.name}"))
        play = self.run_dir / PLAY_FILE
        if play.is_file():
            files.append((play, None, "play"))
        return files

    @staticmethod
    def _name(path: Path, source: str) -> str:
        """The key's file part: unique in the run and free of "/" (an eval's steps repeat training's)."""
        if source == "play":
            return "play"
        stem = path.name.split(".")[0]
        return f"eval-{path.parent.name}-{stem}" if source.startswith("eval:") else stem

    def rows(self) -> list[Row]:
        """Every episode's summary, re-reading files that changed."""
        out: list[Row] = []
        with self._lock:
            for path, step, source in self.episode_files():
                try:
                    st = path.stat()
                except OSError:
                    continue
                sig = (st.st_mtime, st.st_size)
                cached = self._files.get(path)
                if cached is None or cached[0] != sig:
                    name = self._name(path, source)
                    rows = [summarise(f"{name}/{i}", step, source, ep) for i, ep in enumerate(_read_lines(path))]
                    cached = (sig, rows)
                    self._files[path] = cached
                out.extend(cached[1])
        return out

    def episode(self, key: str) -> tuple[Row, dict[str, Any]] | None:
        """One episode by its key, read from its file."""
        name, _, line = key.partition("/")
        if not line.isdigit():
            return None
        for path, step, source in self.episode_files():
            if self._name(path, source) == name:
                eps = _read_lines(path)
                i = int(line)
                if i < len(eps):
                    return summarise(key, step, source, eps[i]), eps[i]
        return None

    # ----------------------------------------------------------------- metrics
    def metrics(self, since: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Rows of metrics.jsonl from line ``since`` on, and the line count read (complete lines only)."""
        path = self.run_dir / "metrics.jsonl"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return [], 0
        lines = text.split("\n")[:-1]  # the last piece is empty or a line still being written
        rows = []
        for line in lines[since:]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows, len(lines)

    # ----------------------------------------------------------------- tournaments
    def tournament_files(self) -> list[Path]:
        found = [*self.extra_tournaments]
        for pattern in ("*.json", "tournament*/*.json", "tournaments/*/*.json"):
            found += [p for p in sorted(self.run_dir.glob(pattern)) if p.name != "config.json"]
        return list(dict.fromkeys(found))

    def tournaments(self) -> list[tuple[Path, Any]]:
        out = []
        for p in self.tournament_files():
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
                out.append((p, {"error": f"cannot read: {e}"}))
                continue
            out.append((p, data))
        return out
