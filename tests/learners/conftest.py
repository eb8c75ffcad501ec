"""Fixtures of the learner tests: a tiny Llama and a one-step gradient probe."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from tiny_model import PAD, tiny_llama

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.update import Learner


@pytest.fixture(scope="module")
def tiny() -> Any:
    return tiny_llama()


GradFn = Callable[..., tuple[torch.Tensor, dict[str, float]]]


@pytest.fixture
def learner_gradient(tiny: Any) -> GradFn:
    """``(samples, progress=None, temperature=1.0, **learner cfg) -> (flat gradient, stats)`` of one
    step on a fresh copy of the tiny model, with the optimizer step skipped."""

    def run(samples: Sequence[Sample], progress: Any = None, temperature: float = 1.0, **cfg: Any):
        model = copy.deepcopy(tiny)
        ref = copy.deepcopy(tiny).requires_grad_(False) if cfg.get("beta", 0.0) > 0 else None
        cfg = {"lr": 1e-3, "beta": 0.0} | cfg
        learner = Learner(model, LearnerConfig(**cfg), PAD, temperature, ref)
        captured: list[torch.Tensor] = []

        def capture() -> float:
            captured.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone())
            model.zero_grad(set_to_none=True)
            return 0.0

        learner._optimizer_step = capture  # type: ignore[method-assign]
        stats = learner.step(samples, progress)
        return captured[0], stats

    return run
