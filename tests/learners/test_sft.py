"""The warm start's loss (arena/learners/sft.py) on the tiny random Llama: its value, micro-batching, and that it learns."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import PAD, flat_grad, seq_log_softmax

from arena.learners.config import LearnerConfig
from arena.learners.sft import demo_sample, reset_optimizer, set_lr, sft_step
from arena.learners.update import Learner
from tolerance import approx32, close32

DEMOS = [
    demo_sample([5, 6, 7], [8, 9, 10, 11]),
    demo_sample([12, 13], [14, 15]),
    demo_sample([5, 6, 7], [20]),
    demo_sample([30, 31, 32, 33, 34], [35, 36, 37]),
]


def _grad(tiny: Any, **cfg: Any) -> tuple[torch.Tensor, dict[str, float]]:
    model = copy.deepcopy(tiny)
    learner = Learner(model, LearnerConfig(lr=1e-3, beta=0.0, **cfg), PAD, temperature=0.7)
    grads: list[torch.Tensor] = []

    def capture() -> float:
        grads.append(flat_grad(model).clone())
        model.zero_grad(set_to_none=True)
        return 0.0

    learner._optimizer_step = capture  # type: ignore[method-assign]
    stats = sft_step(learner, DEMOS)
    return grads[0], stats


def test_nll_is_the_token_mean_of_the_completions_at_temperature_one(tiny: Any) -> None:
    """Reference: each demo unpadded, log-softmax at T=1 (not the learner's sampling 0.7), mean over all 10 tokens."""
    total = 0.0
    for s in DEMOS:
        logp = seq_log_softmax(tiny, s.prompt_ids, s.completion_ids, 1.0)
        total -= float(logp.detach().gather(-1, torch.tensor(s.completion_ids)[:, None]).sum())
    _, stats = _grad(tiny)
    assert stats["tokens"] == 10
    assert stats["nll"] == approx32(total / 10)


@pytest.mark.parametrize("share", [True, False])
def test_micro_batched_equals_full_batch(tiny: Any, share: bool) -> None:
    full, s_full = _grad(tiny, token_budget=4096, share_prompt_prefix=share)
    micro, s_micro = _grad(tiny, token_budget=7, share_prompt_prefix=share)  # every demo its own micro-batch
    assert s_full["micro_batches"] < s_micro["micro_batches"] == len(DEMOS)
    assert s_micro["nll"] == approx32(s_full["nll"])
    close32(micro, full)


def test_the_loss_falls_and_the_optimizer_is_reset_after(tiny: Any) -> None:
    model = copy.deepcopy(tiny)
    learner = Learner(model, LearnerConfig(lr=1e-6, beta=0.0), PAD, temperature=1.0)
    set_lr(learner, 3e-3)
    nll = [sft_step(learner, DEMOS)["nll"] for _ in range(30)]
    assert nll[-1] < 0.1 * nll[0], nll
    assert all(b < a for a, b in zip(nll[:5], nll[1:6], strict=True)), nll[:6]
    assert learner.optimizer.state
    reset_optimizer(learner)
    assert not learner.optimizer.state and learner.optimizer.param_groups[0]["lr"] == 1e-6
