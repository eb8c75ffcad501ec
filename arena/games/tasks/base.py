"""The one type every task source yields, and the protocol a source follows.

A *source* is the material a game is built around: a passage to summarise, a
story premise, a math word problem. Games draw sources with their own RNG, so a
source never owns random state; ``sample(rng)`` is a pure function of the RNG.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

TaskKind = Literal["summary", "story", "math"]


class Source(BaseModel):
    """One unit of task material."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Stable identifier; advantage estimators group by it.")
    kind: TaskKind = Field(description="Which task the text is for.")
    text: str = Field(description="The full, unmasked source x that civilians see.")
    answer: str | None = Field(
        default=None, description="Checkable final answer (math), or None for open-ended tasks."
    )
    title: str | None = Field(default=None, description="Optional human-readable title.")
    origin: str = Field(default="", description="Where the text came from (provenance).")


@runtime_checkable
class TaskSource(Protocol):
    """Anything that yields sources: a procedural generator or a fixed corpus."""

    kind: TaskKind

    def sample(self, rng: np.random.Generator) -> Source:
        """Draw one source using only ``rng`` for randomness."""
        ...
