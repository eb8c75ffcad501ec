"""Where training stands: passed to objective terms and stage schedules."""

from __future__ import annotations

from dataclasses import dataclass


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
