"""Fixed corpora of task sources, read from JSON Lines files.

Summarisation passages and story premises are not generated procedurally: they
are a fixed list of texts, either the small built-in sets shipped in
``games/tasks/data`` or a file the user supplies. This module turns such a file
into a :class:`Corpus`, a :class:`~arena.games.tasks.base.TaskSource` that samples
uniformly with the caller's RNG.

User files are validated strictly and up front, because a malformed corpus
otherwise surfaces hours into a training run. Every problem is reported as a
``ValueError`` naming the file, the line and what is wrong with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import cast, get_args

import numpy as np

from arena.games.tasks.base import Source, TaskKind

__all__ = ["BUILTIN_FILES", "Corpus", "builtin", "load_jsonl"]

#: The data file behind each built-in corpus, inside ``games/tasks/data``.
BUILTIN_FILES: dict[str, str] = {"summary": "passages.jsonl", "story": "story_prompts.jsonl"}

_REQUIRED_KEYS = frozenset({"text"})
_OPTIONAL_KEYS = frozenset({"id", "answer", "title", "origin"})
_ALLOWED_KEYS = _REQUIRED_KEYS | _OPTIONAL_KEYS


class Corpus:
    """A fixed, non-empty list of sources of one kind, sampled uniformly."""

    def __init__(self, sources: Sequence[Source]) -> None:
        if not sources:
            raise ValueError("a Corpus needs at least one source")
        kinds = {source.kind for source in sources}
        if len(kinds) != 1:
            raise ValueError(f"a Corpus holds one kind of source, got {sorted(kinds)}")
        seen: set[str] = set()
        for source in sources:
            if source.id in seen:
                raise ValueError(f"duplicate source id {source.id!r} in Corpus")
            seen.add(source.id)
        self._sources: tuple[Source, ...] = tuple(sources)
        self.kind: TaskKind = self._sources[0].kind

    def __len__(self) -> int:
        return len(self._sources)

    def __getitem__(self, index: int) -> Source:
        return self._sources[index]

    def __repr__(self) -> str:
        return f"Corpus(kind={self.kind!r}, n={len(self)})"

    def sample(self, rng: np.random.Generator) -> Source:
        """Draw one source uniformly at random, using only ``rng``."""
        return self._sources[int(rng.integers(len(self._sources)))]


def _check_kind(kind: str) -> TaskKind:
    valid = get_args(TaskKind)
    if kind not in valid:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {', '.join(valid)}")
    return cast(TaskKind, kind)


def _parse_lines(
    lines: Iterable[bytes], *, name: str, stem: str, kind: TaskKind, default_origin: str
) -> Corpus:
    """Validate and convert raw JSONL lines; ``name`` is used in error messages."""
    sources: list[Source] = []
    first_line_of: dict[str, int] = {}
    for line_no, raw in enumerate(lines, start=1):
        where = f"{name}, line {line_no}"
        try:
            line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")  # tolerate a BOM
        except UnicodeDecodeError as err:
            raise ValueError(f"{where}: not valid UTF-8 ({err.reason})") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: invalid JSON: {err.msg} (column {err.colno})") from None
        except (ValueError, RecursionError) as err:  # e.g. an over-long integer literal
            raise ValueError(f"{where}: invalid JSON: {err}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
        unknown = sorted(set(record) - _ALLOWED_KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"allowed keys are {', '.join(sorted(_ALLOWED_KEYS))}"
            )
        if "text" not in record:
            raise ValueError(f'{where}: missing required key "text"')
        for key, value in record.items():
            if key == "answer" and (value is None or type(value) is int):
                # An integer answer (e.g. math) or an explicit null is fine.
                record[key] = None if value is None else str(value)
            elif not isinstance(value, str):
                raise ValueError(f'{where}: "{key}" must be a string, got {type(value).__name__}')
        if not record["text"].strip():
            raise ValueError(f'{where}: "text" is empty')
        source_id = record.get("id", f"{stem}-{line_no}")
        if not source_id.strip():
            raise ValueError(f'{where}: "id" is empty')
        if source_id in first_line_of:
            first = first_line_of[source_id]
            raise ValueError(f"{where}: duplicate id {source_id!r} (first used on line {first})")
        first_line_of[source_id] = line_no
        sources.append(
            Source(
                id=source_id,
                kind=kind,
                text=record["text"],
                answer=record.get("answer"),
                title=record.get("title"),
                origin=record.get("origin", default_origin),
            )
        )
    if not sources:
        raise ValueError(f"{name}: file contains no records (expected one JSON object per line)")
    return Corpus(sources)


def load_jsonl(path: str | os.PathLike[str], kind: str) -> Corpus:
    """Read a user's corpus: one JSON object per line, blank lines ignored.

    Each object needs ``"text"`` and may give ``"id"`` (default
    ``"<file stem>-<line number>"``), ``"answer"``, ``"title"`` and
    ``"origin"`` (default: the path). Any other key is an error.

    Raises:
        ValueError: ``kind`` is unknown, or the file is empty or malformed; the
            message names the file and line.
        OSError: the file cannot be read.
    """
    task_kind = _check_kind(kind)
    file_path = Path(path)
    data = file_path.read_bytes()
    return _parse_lines(
        data.splitlines(),
        name=str(file_path),
        stem=file_path.stem,
        kind=task_kind,
        default_origin=str(file_path),
    )


@lru_cache(maxsize=None)
def builtin(kind: str) -> Corpus:
    """The corpus shipped with the package for ``kind`` ("summary" or "story")."""
    if kind not in BUILTIN_FILES:
        raise ValueError(
            f"no built-in corpus for kind {kind!r}; built-in kinds are {', '.join(BUILTIN_FILES)}"
        )
    filename = BUILTIN_FILES[kind]
    resource = files("arena.games.tasks") / "data" / filename
    return _parse_lines(
        resource.read_bytes().splitlines(),
        name=f"games/tasks/data/{filename}",
        stem=Path(filename).stem,
        kind=_check_kind(kind),
        default_origin=f"games/tasks/data/{filename}",
    )
