"""Skill-SP's typed settings, reset options and observations (see ``arena/games/skill_sp/__init__.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.core.game import GameConfig
from arena.core.messages import Message
from arena.core.types import safe_text
from arena.games.skill_sp.controller import ControllerConfig
from arena.games.skill_sp.evolve import EvolutionConfig
from arena.games.skill_sp.sandbox import Limits


class SkillSpConfig(GameConfig):
    """Settings of one Skill-SP game; defaults follow the paper where it gives them."""

    probes: int = Field(default=10, ge=1, le=32, description="K frozen-solver probe attempts per proposed task (paper 10).")
    solvers: int = Field(default=4, ge=1, le=32, description="Trainable solver seats per valid task.")
    exploration_share: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="Share of episodes in the skill-free exploration stream (1 - alpha; paper alpha = 0.5).",
    )  # fmt: skip
    proposer_prefix: str = Field(
        default="", description="Written start of the proposer's reply (CPU: '{\"task\": \"'), continued by the model "
        "and parsed with its reply. Paper: none.",
    )
    solver_sees_skill: bool = Field(
        default=False,
        description="Probes and solvers also see the routed skill's name, description and rules (the reading "
        "pi_solver(action | observation, skill)); never its hints, examples or contract. Exploration tasks and "
        "held-out evaluation have no skill to show. False (PROTOCOLS.md: the solver never sees skill text): "
        "the task alone.",
    )
    skills_dir: str | None = Field(default=None, description="Folder of skill packages; default: the seed library.")
    controller: ControllerConfig = Field(default_factory=ControllerConfig, description="Routing, pruning, induction.")
    sandbox: Limits = Field(default_factory=Limits, description="Limits of every sandbox run (validators, checks).")
    sandbox_workers: int = Field(default=4, ge=1, le=64, description="Sandbox runs at once (the bounded pool).")
    mode: Literal["selfplay", "heldout"] = Field(
        default="selfplay",
        description="selfplay: propose, probe, solve; heldout: solvers answer the project's held-out tasks (evaluation).",
    )
    heldout_source: Literal["project", "bfcl_simple"] = Field(
        default="project",
        description="project: the held-out set written for the project (or heldout_path); bfcl_simple: BFCL's "
        "simple_python tasks from the bfcl-eval package.",
    )
    heldout_path: str | None = Field(
        default=None, description="JSONL of held-out tasks {skill, task, contract}; default: data/heldout.jsonl."
    )
    evolution: EvolutionConfig = Field(
        default_factory=EvolutionConfig, description="Induce and refine skills with a frozen model between steps."
    )

    @model_validator(mode="after")
    def _heldout_loads(self) -> SkillSpConfig:
        if self.mode == "heldout":
            from arena.games.skill_sp.heldout import heldout_tasks

            try:  # a broken or missing task file is a config error at start-up
                heldout_tasks(self.heldout_source, self.heldout_path)
            except (OSError, ValueError) as exc:
                raise ValueError(f"heldout_path {self.heldout_path!r}: {exc}") from None
        return self

    @model_validator(mode="after")
    def _library_loads(self) -> SkillSpConfig:
        if self.skills_dir is not None:
            from pathlib import Path

            from arena.games.skill_sp.loader import load_library

            try:  # a broken library is a config error at start-up
                if not load_library(Path(self.skills_dir)):
                    raise ValueError("it holds no skill package")
            except (OSError, ValueError) as exc:
                raise ValueError(f"skills_dir {self.skills_dir!r}: {exc}") from None
        return self


class SkillSpOptions(BaseModel):
    """Reset options: fix the stream or the skill (replaying a chosen task's setting)."""

    model_config = ConfigDict(extra="forbid")
    stream: Literal["auto", "skill", "exploration"] = Field(default="auto", description="Which stream this episode is in.")
    skill: str | None = Field(default=None, description="The skill to route to (implies the skill stream).")
    task: int | None = Field(default=None, ge=0, description="heldout mode: the held-out task's index (default: drawn).")


class SkillSpObservation(Message):
    """What a seat sees. The proposer sees the routed skill (or none); probes and solvers the task and, with
    ``solver_sees_skill``, the skill's name, description and rules."""

    role: Literal["proposer", "probe", "solver"]
    skill: str = ""
    description: str = ""
    rules: str = ""
    hints: str = ""
    example_task: str = ""
    example_contract: str = ""
    kind: Literal["tool_use", "logic", ""] = ""
    tools: tuple[str, ...] = ()
    task: str = ""

    @field_validator("skill", "description", "rules", "hints", "example_task", "example_contract", "task", "tools")
    @classmethod
    def _clean(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        # A skill the evolving model wrote (its YAML and JSON escapes decoded) may hold lone surrogates;
        # the prompt made of this observation must stay writable (issue 39).
        return safe_text(value) if isinstance(value, str) else tuple(safe_text(v) for v in value)
