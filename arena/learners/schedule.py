"""Which phases are trained at each step: stage schedule rules, chosen by ``rule:`` in YAML.

A stage is a list of phases trained together. Rules:

* ``joint`` (default): every step trains ``stages[0]`` if given, else every phase
  that has an estimator;
* ``cycle``: ``stages`` in turn, moving on every ``every`` steps and wrapping
  (SpyRL's public code: ``stages: [[vote], [perform]], every: 1``);
* ``hysteresis``: stay in a stage at least ``min_steps`` steps, then move to the
  next (cyclically) once its ``leave_when`` condition holds on EMAs of game
  metrics (SpyRL's paper: vote leaves when ``all: [detection_accuracy >= 0.9,
  na_rate <= 0.1]``, perform when ``any: [detection_accuracy <= 0.6, na_rate >= 0.5]``);
* ``progress``: stages over training progress ``p`` split at ``boundaries``
  (AUSO's 2:5:3: ``boundaries: [0.2, 0.7]``).

A schedule is training state: ``state_dict()`` goes in checkpoints (JSON).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from arena.learners.progress import Progress

Op = Literal[">=", "<=", ">", "<"]
OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
Condition = tuple[str, Op, float]
Stages = Annotated[list[Annotated[list[str], Field(min_length=1)]], Field(min_length=1)]


def _dedupe(phases: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(phases))


class JointConfig(BaseModel):
    """Train the same phases every step."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["joint"] = "joint"
    stages: Stages | None = Field(
        default=None, max_length=1, description="At most one stage, trained every step; unset: every phase with an estimator."
    )

    def named_phases(self) -> set[str]:
        return set(self.stages[0]) if self.stages else set()


class CycleConfig(BaseModel):
    """Stages in turn, a fixed number of steps each."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["cycle"] = "cycle"
    stages: Stages = Field(description="Stages (lists of phases) in order, starting with the first; wraps around.")
    every: int = Field(default=1, ge=1, description="Steps per stage before moving to the next.")

    def named_phases(self) -> set[str]:
        return {p for stage in self.stages for p in stage}


class LeaveWhen(BaseModel):
    """Exactly one of ``all`` / ``any``: conditions ``[metric, op, threshold]`` or ``"metric op threshold"``."""

    model_config = ConfigDict(extra="forbid")

    all: list[Condition] | None = Field(default=None, min_length=1, description="Leave when every condition holds.")
    any: list[Condition] | None = Field(default=None, min_length=1, description="Leave when some condition holds.")

    @field_validator("all", "any", mode="before")
    @classmethod
    def _split_strings(cls, value: Any) -> Any:
        # YAML cannot hold a bare '>=' in a flow list, so "acc >= 0.9" is accepted too.
        if isinstance(value, list):
            return [c.split() if isinstance(c, str) else c for c in value]
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> LeaveWhen:
        if (self.all is None) == (self.any is None):
            raise ValueError("give exactly one of 'all' or 'any'")
        return self

    def holds(self, values: Mapping[str, float]) -> bool:
        """Whether the condition holds; a metric not seen yet makes its condition false."""
        results = [m in values and OPS[op](values[m], t) for m, op, t in (self.all or self.any or [])]
        return all(results) if self.all is not None else any(results)


class HysteresisStage(BaseModel):
    """One stage of a hysteresis schedule."""

    model_config = ConfigDict(extra="forbid")

    phases: list[str] = Field(min_length=1, description="Phases trained in this stage.")
    leave_when: LeaveWhen | None = Field(default=None, description="When to move to the next stage; unset: never.")


class HysteresisConfig(BaseModel):
    """Stages left when metric EMAs cross thresholds, after a minimum stay."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["hysteresis"] = "hysteresis"
    stages: list[HysteresisStage] = Field(min_length=1, description="Stages in order, starting with the first; wraps around.")
    min_steps: int = Field(default=5, ge=1, description="At least this many steps in a stage before leaving it.")
    ema: float = Field(default=0.9, ge=0.0, lt=1.0, description="EMA decay of the metrics (the first value starts it).")

    def named_phases(self) -> set[str]:
        return {p for stage in self.stages for p in stage.phases}

    def metrics(self) -> list[str]:
        """Every metric named by a condition, in order of appearance."""
        names = [c[0] for s in self.stages if s.leave_when for c in (s.leave_when.all or s.leave_when.any or [])]
        return _dedupe(names)


class ProgressConfig(BaseModel):
    """Stages over training progress (0 on the first step, 1 on the last)."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["progress"] = "progress"
    stages: Stages = Field(description="Stages in order of training progress.")
    boundaries: list[float] = Field(
        default_factory=list,
        description="Increasing progress values in (0, 1) where the next stage starts; one fewer than stages.",
    )

    @model_validator(mode="after")
    def _check_boundaries(self) -> ProgressConfig:
        b = self.boundaries
        if len(b) != len(self.stages) - 1:
            raise ValueError(f"boundaries: need {len(self.stages) - 1} (one fewer than stages), got {len(b)}")
        if any(not 0.0 < x < 1.0 for x in b) or any(x >= y for x, y in zip(b, b[1:])):
            raise ValueError(f"boundaries: must increase strictly within (0, 1) (got {b})")
        return self

    def named_phases(self) -> set[str]:
        return {p for stage in self.stages for p in stage}


class Schedule:
    """Base of the rules: ``phases(progress)`` before a step, ``update(metrics)`` after it."""

    config_type: ClassVar[type[BaseModel]]

    def __init__(self, cfg: Any, default_phases: Sequence[str]):
        self.cfg = cfg
        self.default_phases = _dedupe(default_phases)
        self.stage = 0
        self.steps_in_stage = 0

    def phases(self, progress: Progress | None = None) -> list[str]:
        return _dedupe(self.cfg.stages[self.stage])

    def update(self, metrics: Mapping[str, float]) -> None:
        """Advance after a step, given that step's mean game metrics (without the 'game/' prefix)."""
        self.steps_in_stage += 1

    def _next_stage(self) -> None:
        self.stage = (self.stage + 1) % len(self.cfg.stages)
        self.steps_in_stage = 0

    def state_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "steps_in_stage": self.steps_in_stage}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stage = int(state["stage"])
        self.steps_in_stage = int(state["steps_in_stage"])


SCHEDULE_RULES: dict[str, type[Schedule]] = {}


def register_rule(cls: type[Schedule]) -> type[Schedule]:
    SCHEDULE_RULES[cls.config_type.model_fields["rule"].default] = cls
    return cls


@register_rule
class JointSchedule(Schedule):
    config_type = JointConfig

    def phases(self, progress: Progress | None = None) -> list[str]:
        return _dedupe(self.cfg.stages[0]) if self.cfg.stages else list(self.default_phases)


@register_rule
class CycleSchedule(Schedule):
    config_type = CycleConfig

    def update(self, metrics: Mapping[str, float]) -> None:
        super().update(metrics)
        if self.steps_in_stage >= self.cfg.every:
            self._next_stage()


@register_rule
class HysteresisSchedule(Schedule):
    config_type = HysteresisConfig

    def __init__(self, cfg: HysteresisConfig, default_phases: Sequence[str]):
        super().__init__(cfg, default_phases)
        self.ema: dict[str, float] = {}

    def phases(self, progress: Progress | None = None) -> list[str]:
        return _dedupe(self.cfg.stages[self.stage].phases)

    def update(self, metrics: Mapping[str, float]) -> None:
        super().update(metrics)
        decay = self.cfg.ema
        for name in self.cfg.metrics():
            if name in metrics:
                old = self.ema.get(name)
                x = float(metrics[name])
                self.ema[name] = x if old is None else decay * old + (1 - decay) * x
        leave = self.cfg.stages[self.stage].leave_when
        if leave is not None and self.steps_in_stage >= self.cfg.min_steps and leave.holds(self.ema):
            self._next_stage()

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"ema": dict(self.ema)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.ema = {k: float(v) for k, v in state["ema"].items()}


@register_rule
class ProgressSchedule(Schedule):
    config_type = ProgressConfig

    def phases(self, progress: Progress | None = None) -> list[str]:
        if progress is None:
            raise ValueError("schedule rule 'progress' needs the training progress (phases(Progress(step, total)))")
        stage = sum(progress.fraction >= b for b in self.cfg.boundaries)
        return _dedupe(self.cfg.stages[stage])


def _rule_of(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return str(value.get("rule", "joint"))
    return getattr(value, "rule", None)


_known = ", ".join(SCHEDULE_RULES)
ScheduleConfig = Annotated[
    Union[tuple(Annotated[cls.config_type, Tag(name)] for name, cls in SCHEDULE_RULES.items())],  # noqa: UP007
    Discriminator(_rule_of, custom_error_type="unknown_rule", custom_error_message=f"unknown schedule rule; known: {_known}"),
]
"""``train.schedule``: one of the rules' configs, chosen by its ``rule`` key (default ``joint``)."""


def make_schedule(cfg: BaseModel, default_phases: Sequence[str]) -> Schedule:
    """The schedule for a validated rule config; ``default_phases`` are the phases with an estimator."""
    return SCHEDULE_RULES[cfg.rule](cfg, default_phases)  # type: ignore[attr-defined]


def schedule_phases(cfg: BaseModel) -> set[str]:
    """Every phase the schedule config names (to check against the game's phases at config time)."""
    return cfg.named_phases()  # type: ignore[attr-defined]
