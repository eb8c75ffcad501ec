"""Where training stands: passed to objective terms and stage schedules."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    """Step ``step`` (from 1) of ``total`` training steps."""

    step: int
    total: int

    def __post_init__(self) -> None:
        if self.total < 1 or self.step < 1:
            raise ValueError(f"Progress needs step >= 1 and total >= 1 (got step={self.step}, total={self.total})")

    @property
    def fraction(self) -> float:
        """``(step - 1) / (total - 1)`` clamped to [0, 1]: 0 on the first step, 1 on the last; 1 when total is 1."""
        if self.total == 1:
            return 1.0
        return min(1.0, max(0.0, (self.step - 1) / (self.total - 1)))


def set_lr(learner: Any, lr: float) -> None:
    """The learning rate of every parameter group of the learner's optimizer."""
    for group in learner.optimizer.param_groups:
        group["lr"] = lr


def scheduled_lr(lr: float, lr_end: float | None, schedule: str, fraction: float) -> float:
    """The learning rate at training ``fraction`` (``Progress.fraction``: 0 on the first step, 1 on the last)::

        constant:     lr
        linear:       lr_end + (lr - lr_end) * (1 - f)
        cosine:       lr_end + (lr - lr_end) * (1 + cos(pi f)) / 2
        inverse_sqrt: lr / sqrt(1 + c f),  c = (lr / lr_end)^2 - 1

    so the first step trains at ``lr`` and the last at ``lr_end`` (``None``: ``lr``, i.e. constant).
    ``inverse_sqrt`` is the decaying rate OpenSpiel's maintainers give neural exploitability descent on Leduc
    (open_spiel issue #129: ``lr = 1 / sqrt(1 + 0.01 t)`` over ``t`` steps), written in the run's fraction so
    that it ends at ``lr_end``: ``c = 0.01 (T - 1)`` is that schedule over ``T`` steps."""
    if schedule == "constant" or lr_end is None:
        return lr
    if schedule == "linear":
        return lr_end + (lr - lr_end) * (1.0 - fraction)
    if schedule == "cosine":
        return lr_end + (lr - lr_end) * (1.0 + math.cos(math.pi * fraction)) / 2.0
    if schedule == "inverse_sqrt":  # lr_end > 0 (LearnerConfig refuses 0)
        return lr / math.sqrt(1.0 + ((lr / lr_end) ** 2 - 1.0) * fraction)
    raise ValueError(f"lr schedule {schedule!r}: expected constant, linear, cosine or inverse_sqrt")
