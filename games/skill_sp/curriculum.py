"""The solver curriculum as a registered advantage estimator, ``skill_sp_curriculum``.

Use it for the ``solve`` phase::

    learner:
      estimators:
        solve: {name: skill_sp_curriculum, group_by: [episode, phase], options: {tasks: 4, alpha: 0.5}}

It reads each solve turn's episode (its ``stream`` and the proposer's reward), keeps the
solver turns of the tasks :func:`games.skill_sp.rules.curriculum` selects (top ``alpha*M``
skill-stream and top ``(1-alpha)*M`` exploration tasks by proposer reward, M = ``tasks``),
and gives them GRPO advantages over ``group_by``; every other turn is dropped.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from games.skill_sp.rules import curriculum
from learners.advantages import grpo, group_index, zero_variance
from learners.estimators import ESTIMATORS, EstimatorInput, EstimatorOutput, register_estimator


class CurriculumOptions(BaseModel):
    """Options of ``skill_sp_curriculum``."""

    model_config = ConfigDict(extra="forbid")
    tasks: int = Field(default=8, ge=1, description="M: valid tasks per step the solvers train on.")
    alpha: float = Field(default=0.5, ge=0.0, le=1.0, description="Share of M from the skill stream (paper 0.5).")
    fill: bool = Field(default=False, description="Let one stream use the other's unused quota (paper: not said).")


def curriculum_estimator(inp: EstimatorInput, options: CurriculumOptions, state: dict[str, Any]) -> EstimatorOutput:
    """GRPO over ``group_by`` on the selected tasks' solver turns; ``keep`` is False for all others."""
    games = sorted(set(inp.games.tolist()))
    tasks = [(str(inp.episodes[g].info.get("stream")), float(inp.episodes[g].rewards.get("proposer", 0.0))) for g in games]
    chosen = {games[i] for i in curriculum(tasks, options.tasks, options.alpha, options.fill)}
    selected = torch.tensor([g in chosen for g in inp.games.tolist()], dtype=torch.bool)
    groups = group_index(inp.keys, inp.group_by)
    adv = grpo(inp.rewards, groups, scale=True)
    keep = selected & ~zero_variance(inp.rewards, groups) if inp.drop_zero_variance else selected
    return EstimatorOutput(torch.where(selected, adv, torch.zeros_like(adv)), keep)


if "skill_sp_curriculum" not in ESTIMATORS:  # a re-imported module must not register twice
    register_estimator("skill_sp_curriculum", options=CurriculumOptions)(curriculum_estimator)
