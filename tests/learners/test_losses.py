"""Losses, KL estimators and aggregation against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from arena.learners.losses import (
    aggregate, aggregation_weights, clipped_surrogate, kl_penalty, phase_aggregation_weights, reinforce_detached,
)
from tolerance import approx32, close32


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


# ------------------------------------------------------------------ per-phase aggregation (LSP's L_sol + alpha_ch L_ch)
def lsp_batch() -> list:
    """The audit's case: 2 queries x 5 solvers; 7 challenger tokens (3 + 4), 45 solver tokens."""
    from arena.core.types import Sample

    out = []
    for q, n_ch in enumerate((3, 4)):
        out.append(Sample(prompt_ids=[3 + q, 4], completion_ids=[5 + t for t in range(n_ch)], advantage=(-1) ** q * 0.5,
                          phase="challenge", role="challenger", weight=0.7))
        for j in range(5):
            n = 4 + j + q  # 4..8 and 5..9 tokens: 30 + 35 = 65 ... trimmed below to 45
            out.append(Sample(prompt_ids=[20 + q, 21 + j], completion_ids=[9 + (t + j) % 11 for t in range(n)],
                              advantage=0.3 * (j - 2), phase="solve", role="solver"))
    return out


def test_phase_aggregation_weights_hand_values() -> None:
    """7 challenger and 45 solver tokens: each challenger token weighs 1/7 and each solver token 1/45
    (their losses are each role's own mean); pooled, every token weighs 1/52."""
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    w = phase_aggregation_weights(mask, "token", ["challenge", "solve"], {"challenge": 7.0, "solve": 45.0},
                                  {"challenge": 2, "solve": 10}, None)
    close = lambda got, want: torch.testing.assert_close(got, torch.tensor(want))  # noqa: E731
    close(w, [[1 / 7] * 3 + [0.0], [1 / 45] * 2 + [0.0, 0.0]])
    pooled = aggregation_weights(mask, "token", 52.0, 12, None)
    close(pooled, [[1 / 52] * 3 + [0.0], [1 / 52] * 2 + [0.0, 0.0]])
    seq = phase_aggregation_weights(mask, "sequence", ["challenge", "solve"], {"challenge": 7.0, "solve": 45.0},
                                    {"challenge": 2, "solve": 10}, None)
    close(seq, [[1 / 3 / 2] * 3 + [0.0], [1 / 2 / 10] * 2 + [0.0, 0.0]])
    const = phase_aggregation_weights(mask, "constant", ["challenge", "solve"], {"challenge": 7.0, "solve": 45.0},
                                      {"challenge": 2, "solve": 10}, 8.0)
    close(const, [[1 / 16] * 3 + [0.0], [1 / 80] * 2 + [0.0, 0.0]])


def test_lsp_loss_is_l_sol_plus_alpha_l_ch_and_micro_batching_keeps_it(learner_gradient) -> None:
    """The gradient with ``aggregate_per_phase`` is grad L_sol + alpha_ch grad L_ch, each role's token
    mean over its own tokens (alpha_ch = 0.7 = the challenger samples' weight), with or without a
    split into micro-batches; the pooled mean (off) is a different gradient."""
    samples = lsp_batch()
    solver_tokens = sum(len(s.completion_ids) for s in samples if s.phase == "solve")
    challenger_tokens = sum(len(s.completion_ids) for s in samples if s.phase == "challenge")
    assert challenger_tokens == 7
    # trim the solvers to 45 tokens in all, as in the audit
    extra = solver_tokens - 45
    for s in reversed(samples):
        if extra and s.phase == "solve" and len(s.completion_ids) > 2:
            cut = min(extra, len(s.completion_ids) - 2)
            s.completion_ids = s.completion_ids[: len(s.completion_ids) - cut]
            extra -= cut
    assert sum(len(s.completion_ids) for s in samples if s.phase == "solve") == 45
    base = {"loss": "reinforce", "beta": 0.05, "kl_estimator": "k1", "share_prompt_prefix": False}
    sol, _ = learner_gradient([s for s in samples if s.phase == "solve"], token_budget=10_000, **base)
    ch, _ = learner_gradient([s for s in samples if s.phase == "challenge"], token_budget=10_000, **base)
    want = sol + ch  # each run is its role's own token mean; the challenger rows carry weight 0.7
    full, stats = learner_gradient(samples, token_budget=10_000, aggregate_per_phase=True, **base)
    micro, micro_stats = learner_gradient(samples, token_budget=24, aggregate_per_phase=True, **base)
    assert stats["micro_batches"] == 1 and micro_stats["micro_batches"] > 3
    close32(full, want)
    close32(micro, full)
    assert micro_stats["loss"] == approx32(stats["loss"])
    pooled, _ = learner_gradient(samples, token_budget=10_000, **base)
    pooled_want = (45 * sol + 7 * ch) / 52  # each token 1/52
    close32(pooled, pooled_want)
    assert (pooled - full).norm() > 0.1 * full.norm()
