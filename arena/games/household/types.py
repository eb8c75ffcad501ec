"""The household game's typed settings, reset options and observations (spec: ``arena/games/household/__init__.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.core.game import GameConfig, InvalidOutputConfig
from arena.core.messages import Message
from arena.games.household.tasks import TASK_SETS, TaskType


class SkillsConfig(BaseModel):
    """Skills as context text (``games/household/skills/``)."""

    model_config = ConfigDict(extra="forbid")

    student: Literal["retrieved", "none"] = Field(
        default="retrieved", description="retrieved: the top-k skills for the task in the prompt; none: no skills."
    )
    k: int = Field(default=3, ge=1, le=32, description="How many skills the student prompt gets (public code: 3).")
    retriever: Literal["bm25", "embedding"] = Field(
        default="bm25",
        description="bm25: lexical BM25 over the skills' titles and texts; embedding: cosine of mean-pooled "
        "embeddings by embedding_model (games/household/skills/).",
    )
    embedding_model: str = Field(
        default="smollm2-135m",
        description="retriever embedding: a built-in model name, a local model folder or a hub id (no downloads "
        "here) of any HF encoder or decoder; its mean-pooled last hidden states are the embeddings.",
    )
    probes: bool = Field(
        default=False,
        description="Record AUSO's probe contexts on every turn: 'teacher' (all skills, principles and mistakes) and "
        "'no_skill'. They cost forward passes in the learner only when an objective reads them.",
    )
    library: str | None = Field(default=None, description="A skills JSON file of your own; default: the built-in one.")

    @field_validator("library")
    @classmethod
    def _library_is_a_json_file(cls, v: str | None) -> str | None:
        """A missing, unreadable or non-JSON library fails at start-up, naming this field."""
        if v is None:
            return v
        import json
        from pathlib import Path

        try:
            json.loads(Path(v).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read skills from it: not a readable JSON file ({type(e).__name__}: {' '.join(str(e).split())[:120]})") from None
        return v


class HouseholdConfig(GameConfig):
    """Settings of one household game; defaults follow AUSO's public ALFWorld code."""

    invalid: InvalidOutputConfig = Field(
        default_factory=lambda: InvalidOutputConfig(mode="penalty", penalty=-0.1),
        description="Unparseable or inadmissible actions: by default 0.1 off that turn (public code).",
    )
    attempts: int = Field(default=8, ge=1, le=64, description="G: seats playing copies of the same world.")
    max_steps: int = Field(default=30, ge=1, le=200, description="Steps per attempt before it ends unsolved (truncation).")
    history: int = Field(default=2, ge=0, le=30, description="Recent (observation, action) steps shown in the prompt.")
    split: Literal["train", "eval"] = Field(default="train", description="train: even world ids; eval: odd ones.")
    task_types: Literal["in_domain", "held_out", "all"] | list[TaskType] = Field(
        default="in_domain",
        description="Task types drawn: in_domain (pick_and_place, clean, cool), held_out (examine, heat, pick_two), "
        "all, or a list of names.",
    )
    receptacles: tuple[int, int] = Field(default=(6, 12), description="Inclusive range of receptacles per room.")
    objects: tuple[int, int] = Field(default=(6, 12), description="Inclusive range of objects per room.")
    require_think: bool = Field(default=True, description="The completion needs <think>...</think> before <action>.")
    action_prefix: str = Field(
        default="", description="Written start of every reply (CPU: '<action>'), continued by the model and parsed "
        "with its reply; the probes get it too. Public code: none.",
    )
    action_match: Literal["exact", "nearest"] = Field(
        default="exact", description="exact (public code): the action must be admissible as written; nearest (CPU): "
        "otherwise the admissible action sharing the most words (counted in approximate_rate).",
    )
    skills: SkillsConfig = Field(default_factory=SkillsConfig, description="Skills in the prompt and AUSO's probes.")

    @model_validator(mode="after")
    def _ranges(self) -> HouseholdConfig:
        for name in ("receptacles", "objects"):
            lo, hi = getattr(self, name)
            if not 2 <= lo <= hi <= 40:
                raise ValueError(f"{name}: need 2 <= low <= high <= 40, got ({lo}, {hi})")
        if isinstance(self.task_types, list) and not self.task_types:
            raise ValueError("task_types: name at least one task type")
        return self

    @property
    def types(self) -> tuple[TaskType, ...]:
        tt = self.task_types
        return TASK_SETS[tt] if isinstance(tt, str) else tuple(dict.fromkeys(tt))


class HouseholdOptions(BaseModel):
    """What ``reset(options=...)`` may fix."""

    model_config = ConfigDict(extra="forbid")

    world_id: int | None = Field(default=None, ge=0, description="The world (and task) to play; None: drawn from the split.")


class HouseholdObservation(Message):
    """What one attempt's seat sees before its next action."""

    phase: Literal["act", "done"]
    seat_index: int = Field(ge=0)
    task: str
    step: int = Field(ge=0, description="Actions taken so far in this attempt.")
    history: tuple[tuple[str, str], ...] = Field(default=(), description="Recent (observation, action) pairs, oldest first.")
    observation: str
    admissible: tuple[str, ...] = ()
    skills: tuple[str, ...] = Field(default=(), description="Skill texts shown in the prompt.")
