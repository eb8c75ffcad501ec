"""``train.episodes``: each step's episodes with the learner's advantages, for ``python -m arena.view``.

Rank 0 writes ``<run_dir>/episodes/`` (gzip JSONL, arena/view/record.py) until it holds ``max_mb``;
``runner.episodes_jsonl`` (a file name in the run folder) also gets every step's raw episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import write_jsonl
from arena.loop.component import Component, StepContext


class EpisodesConfig(BaseModel):
    """``train.episodes``: the episode log the viewer reads."""

    model_config = ConfigDict(extra="forbid")

    save: bool = Field(default=True, description="Save each step's episodes with the learner's advantages to "
                       "<run_dir>/episodes/ (gzip JSONL, read by python -m arena.view).")
    max_mb: float = Field(default=200.0, gt=0, description="Stop saving episodes once <run_dir>/episodes/ holds this "
                          "many MB.")


class Episodes(Component):
    """The step's episodes and samples of the first trainable policy, as the viewer reads them (rank 0)."""

    name = "episodes"
    section = EpisodesConfig
    section_default = EpisodesConfig
    section_doc = "The episode log the viewer reads (arena/loop/components/episodes.py)."
    renamed = {"save_episodes": "save", "episodes_max_mb": "max_mb"}

    def __init__(self, log: Any, first: str, jsonl: Any):
        self.log, self.first, self.jsonl = log, first, jsonl

    @classmethod
    def build(cls, plan: Any, parts: Any) -> Episodes | None:
        cfg = plan.cfg
        if not parts.dist.main or not (cfg.train.episodes.save or cfg.runner.episodes_jsonl):
            return None
        log = None
        if cfg.train.episodes.save:
            from arena.view.record import EpisodeLog

            group_by = {phase: list(est.group_by) for phase, est in cfg.learner.estimators.items()}
            log = EpisodeLog(parts.run_dir, cfg.train.episodes.max_mb, parts.trained[0].tokenizer, cfg.trainable,
                             group_by, fresh=parts.resume is None)
        jsonl = parts.run_dir / cfg.runner.episodes_jsonl if cfg.runner.episodes_jsonl else None
        return cls(log, parts.trained[0].name, jsonl)

    def before_update(self, ctx: StepContext, unit: Any, samples: Sequence[Any]) -> None:
        if self.log is not None and unit.name == self.first:
            self.log.write(ctx.step, ctx.episodes, samples)

    def logged(self, ctx: StepContext, row: dict[str, Any]) -> None:
        if self.jsonl is not None:
            write_jsonl(ctx.episodes, self.jsonl)
