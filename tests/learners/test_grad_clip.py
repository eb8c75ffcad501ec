"""The learner's clip (arena/learners/clip.py ``clipped_step``, through ``Learner._clipped_step``): the global-norm clip applied by
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
from tolerance import approx32, close32


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
        assert a["grad_norm"] == approx32(b["grad_norm"])
        assert (a["grad_norm"] > clip) == (clip < 1.0), "the small clip is active at every step, the large never"
    for p, q in zip(folded.model.parameters(), reference.model.parameters(), strict=True):
        close32(p, q)
    assert not hasattr(folded.optimizer, "grad_scale"), "the scale is the step's own, not left for the next"


def test_the_step_divides_by_the_norm_over_the_clip(tiny: Any) -> None:
    """The scale the kernel reads: (norm + 1e-6) / grad_clip where that is above 1, none below. Norms near
    the 1e-6 make its every part count: norm 2e-6 at a clip of 2e-6 gives 1.5 (2e-6 alone would give 1)."""
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lr=1e-2, beta=0.0, grad_clip=2e-6), PAD)
    params = learner._trained()
    n = sum(p.numel() for p in params)
    seen: list[Any] = []
    step = learner.optimizer.step
    learner.optimizer.step = lambda: (seen.append(getattr(learner.optimizer, "grad_scale", "unset")), step())[1]
    for norm in (2e-6, 0.5e-6):  # scale 1.5 (clipped), then 0.75 (untouched)
        for p in params:
            p.grad = torch.full_like(p, norm / n**0.5)
        assert float(learner._clipped_step(params)) == approx32(norm)
    assert float(seen[0]) == approx32(1.5) and seen[1] is None


def test_a_non_finite_norm_leaves_the_weights_non_finite_as_clip_grad_norm_does(tiny: Any) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lr=1e-2, beta=0.0), PAD)
    params = learner._trained()
    for p in params:
        p.grad = torch.ones_like(p)
    params[0].grad[0, 0] = float("inf")
    norm = learner._clipped_step(params)
    assert norm.isinf() and not hasattr(learner.optimizer, "grad_scale")
    assert not torch.isfinite(params[0]).all(), "as clip_grad_norm_ leaves it: the run's NaN guard sees it"
