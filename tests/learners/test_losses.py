"""Losses, KL estimators and aggregation against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from learners.losses import aggregate, clipped_surrogate, kl_penalty, reinforce_detached, aggregation_weights


def test_clipped_surrogate_hand_computed() -> None:
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))
    pos = clipped_surrogate(logp, old, torch.tensor([2.0]), clip_low=0.2, clip_high=0.2)
    # A > 0: min(r A, clip(r) A): 1.5 -> 1.2*2; 0.5 -> 0.5*2; 1.1 -> 1.1*2
    assert (-pos).tolist()[0] == pytest.approx([2.4, 1.0, 2.2])
    neg = clipped_surrogate(logp, old, torch.tensor([-1.0]), clip_low=0.2, clip_high=0.28)
    # A < 0: min(-r, -clip(r)): 1.5 -> -1.5; 0.5 -> -0.8; 1.1 -> -1.1
    assert (-neg).tolist()[0] == pytest.approx([-1.5, -0.8, -1.1])


def test_clipped_gradient_vanishes_outside_the_trust_region() -> None:
    logp = torch.log(torch.tensor([[1.5, 1.0]])).requires_grad_()
    clipped_surrogate(logp, torch.zeros(1, 2), torch.tensor([1.0])).sum().backward()
    assert logp.grad.tolist()[0] == pytest.approx([0.0, -1.0])


def test_reinforce_detached_value_and_gradient() -> None:
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss = reinforce_detached(logp, torch.tensor([3.0]))
    assert loss.tolist()[0] == pytest.approx([-3.0, -3.0])
    loss.sum().backward()
    assert logp.grad.tolist()[0] == pytest.approx([-3.0, -3.0])


def test_kl_estimators() -> None:
    logp, ref = torch.tensor([[-1.0, -0.5]]), torch.tensor([[-1.2, -0.5]])
    assert kl_penalty(logp, ref, "k1").tolist()[0] == pytest.approx([0.2, 0.0])
    d = -0.2
    assert kl_penalty(logp, ref, "k3").tolist()[0] == pytest.approx([math.exp(d) - d - 1, 0.0])
    same = torch.randn(3, 4)
    assert kl_penalty(same, same, "k3").abs().max() == 0 and kl_penalty(same, same, "k1").abs().max() == 0


def test_aggregation_modes() -> None:
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert float(aggregate(loss, mask, "token")) == pytest.approx(10 / 4)
    assert float(aggregate(loss, mask, "sequence")) == pytest.approx((2 + 4) / 2)
    assert float(aggregate(loss, mask, "constant", constant=5)) == pytest.approx(10 / (2 * 5))


@pytest.mark.parametrize("mode", ["token", "sequence", "constant"])
def test_micro_batch_weights_reproduce_the_full_batch_loss(mode: str) -> None:
    loss = torch.rand(5, 7)
    mask = (torch.rand(5, 7) > 0.3).float()
    mask[:, 0] = 1.0
    full = aggregate(loss, mask, mode, constant=7.0)  # type: ignore[arg-type]
    n_tok = float(mask.sum())
    parts = sum(
        float((loss[i:j] * aggregation_weights(mask[i:j], mode, n_tok, 5, 7.0)).sum())  # type: ignore[arg-type]
        for i, j in [(0, 2), (2, 5)]
    )
    assert parts == pytest.approx(float(full))
