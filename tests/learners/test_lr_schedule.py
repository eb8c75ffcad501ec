"""``learner.lr_schedule`` (arena/learners/progress.py ``scheduled_lr``): by hand, and the optimizer's rate
inside ``Learner.step``."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.progress import Progress, scheduled_lr
from arena.learners.update import Learner


def test_scheduled_lr_by_hand() -> None:
    assert scheduled_lr(1.0, 0.1, "constant", 0.7) == 1.0
    assert scheduled_lr(1.0, None, "cosine", 0.7) == 1.0  # no end: no decay
    assert [scheduled_lr(1.0, 0.2, "linear", f) for f in (0.0, 0.25, 1.0)] == pytest.approx([1.0, 0.8, 0.2])
    assert [scheduled_lr(1.0, 0.2, "cosine", f) for f in (0.0, 0.5, 1.0)] == pytest.approx([1.0, 0.6, 0.2])
    assert scheduled_lr(1.0, 0.2, "cosine", 0.25) == pytest.approx(0.2 + 0.8 * (1 + math.cos(math.pi / 4)) / 2)
    assert scheduled_lr(2.0, 0.0, "linear", 0.75) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="expected constant, linear, cosine or inverse_sqrt"):
        scheduled_lr(1.0, 0.1, "step", 0.5)


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_the_learner_steps_at_the_scheduled_rate(tiny: Any, schedule: str) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lr=1e-3, lr_end=1e-4, lr_schedule=schedule, beta=0.0), 0)
    batch = [Sample(prompt_ids=[5, 6, 7], completion_ids=[8, 9], advantage=1.0)]
    stats = learner.step(batch, Progress(3, 5))
    want = 1e-3 if schedule == "constant" else 1e-4 + 9e-4 * 0.5
    assert [g["lr"] for g in learner.optimizer.param_groups] == pytest.approx([want] * len(learner.optimizer.param_groups))
    assert stats.get("lr", 1e-3) == pytest.approx(want)
    assert ("lr" in stats) == (schedule != "constant")
