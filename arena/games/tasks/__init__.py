"""Task material for the games: passages, story premises and math problems.

Every game draws its source text from a :class:`TaskSource`. Fixed texts come
from a :class:`Corpus` (the built-in sets or a user's JSONL file) and math
problems from the :class:`MathWordProblems` generator; :func:`make_source`
picks the right one from a config's ``kind`` and optional ``path``.
"""

from __future__ import annotations

from typing import get_args

from arena.games.tasks.base import Source, TaskKind, TaskSource
from arena.games.tasks.corpus import Corpus, builtin, load_jsonl
from arena.games.tasks.math import MathWordProblems, check_answer

__all__ = [
    "Corpus",
    "MathWordProblems",
    "Source",
    "TaskKind",
    "TaskSource",
    "builtin",
    "check_answer",
    "load_jsonl",
    "make_source",
]


def make_source(kind: str, path: str | None = None) -> TaskSource:
    """The task source for ``kind``: the user's file at ``path`` if given, else the default.

    Defaults are the procedural generator for "math" and the built-in corpus for
    "summary" and "story".

    Raises:
        ValueError: ``kind`` is not a known task kind, or the file is malformed.
    """
    valid = get_args(TaskKind)
    if kind not in valid:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {', '.join(valid)}")
    if path is not None:
        return load_jsonl(path, kind)
    if kind == "math":
        return MathWordProblems()
    return builtin(kind)
