"""The learner's clip (arena/learners/update.py, ``Learner._clipped_step``): the global-norm clip applied by
the fused AdamW kernel as it reads the gradients, against ``clip_grad_norm_`` then AdamW, step by step."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import PAD

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.update import Learner


def batches() -> list[list[Sample]]:
    """Three steps whose gradients differ in size, so a clip that were dropped or mis-scaled shows
    through Adam (which would not see one constant factor on every step)."""
    g = torch.Generator().manual_seed(3)
    out = []
    for step in range(3):
        rows = []
        for r in range(2 + step):
            prompt = torch.randint(1, 64, (4 + r,), generator=g).tolist()
            reply = torch.randint(1, 64, (2 + step,), generator=g).tolist()
            rows.append(Sample(prompt_ids=prompt, completion_ids=reply, advantage=(r + 1) * (-1.0) ** r * (step + 1)))
        out.append(rows)
    return out


def reference_step(learner: Learner, params: list[torch.Tensor]) -> torch.Tensor:
    norm = torch.nn.utils.clip_grad_norm_(params, learner.cfg.grad_clip)
    learner.optimizer.step()
    return norm


@pytest.mark.parametrize("clip", [1e-3, 1e9])
def test_the_folded_clip_equals_clip_grad_norm_then_adamw(tiny: Any, clip: float) -> None:
    cfg = LearnerConfig(lr=1e-2, beta=0.0, loss="reinforce", grad_clip=clip)
    folded, reference = Learner(copy.deepcopy(tiny), cfg, PAD), Learner(copy.deepcopy(tiny), cfg, PAD)
    reference._clipped_step = lambda params: reference_step(reference, params)  # type: ignore[method-assign]
    for samples in batches():
        a, b = folded.step(samples), reference.step(samples)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)
        assert (a["grad_norm"] > clip) == (clip < 1.0), "the small clip is active at every step, the large never"
    for p, q in zip(folded.model.parameters(), reference.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)
    assert not hasattr(folded.optimizer, "grad_scale"), "the scale is the step's own, not left for the next"


def test_a_non_finite_norm_takes_clip_grad_norm_s_path(tiny: Any) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lr=1e-2, beta=0.0), PAD)
    params = learner._trained()
    for p in params:
        p.grad = torch.ones_like(p)
    params[0].grad[0, 0] = float("inf")
    norm = learner._clipped_step(params)
    assert norm.isinf() and not hasattr(learner.optimizer, "grad_scale")
    assert not torch.isfinite(params[0]).all(), "as clip_grad_norm_ leaves it: the run's NaN guard sees it"
