"""The importance correction between generator and learner (arena/learners/losses.py::importance_weights):
hand values, and the learner's gradient with it on a tiny model, micro-batched equal to full-batch."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from arena.learners.losses import importance_weights
from tests.learners.test_losses import lsp_batch
from tolerance import approx32, close32


def test_importance_weights_hand_values() -> None:
    """rho = exp(old - gen): 1/2, 1, 3 and a missing generator logprob (rho 1); cap 2."""
    old = torch.log(torch.tensor([[0.25, 0.5, 0.6, 0.3]]))
    gen = torch.log(torch.tensor([[0.5, 0.5, 0.2, float("nan")]]))
    gen[0, 3] = float("nan")
    w, rho = importance_weights(old, gen, "tis", 2.0)
    assert rho.tolist()[0] == pytest.approx([0.5, 1.0, 3.0, 1.0])
    assert w.tolist()[0] == pytest.approx([0.5, 1.0, 2.0, 1.0])
    w, _ = importance_weights(old, gen, "mis", 2.0)
    assert w.tolist()[0] == pytest.approx([0.5, 1.0, 0.0, 1.0])
    w, _ = importance_weights(old, gen, "none", 2.0)
    assert w.tolist()[0] == [1.0] * 4
    w, _ = importance_weights(old, gen, "tis", 3.5)
    assert w.tolist()[0] == pytest.approx([0.5, 1.0, 3.0, 1.0])


def test_importance_weights_carry_no_gradient() -> None:
    old = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    w, rho = importance_weights(old, torch.tensor([[-1.5, -1.0]]), "tis", 2.0)
    assert not w.requires_grad and not rho.requires_grad


def with_gen_logprobs(samples, value):
    for s in samples:
        s.logprobs = [value] * len(s.completion_ids)
    return samples


def test_tis_scales_the_gradient_by_the_cap_and_mis_drops_it(learner_gradient) -> None:
    """Generator logprobs of -60 put every token's ratio far above the cap: with the detached-ratio
    REINFORCE loss, tis multiplies the whole gradient by the cap, mis zeroes it, none leaves it."""
    base = {"loss": "reinforce", "share_prompt_prefix": False, "token_budget": 10_000}
    plain, stats = learner_gradient(with_gen_logprobs(lsp_batch(), -60.0), **base)
    tis, tis_stats = learner_gradient(with_gen_logprobs(lsp_batch(), -60.0), importance={"mode": "tis", "cap": 1.5}, **base)
    mis, _ = learner_gradient(with_gen_logprobs(lsp_batch(), -60.0), importance={"mode": "mis", "cap": 1.5}, **base)
    torch.testing.assert_close(tis, 1.5 * plain)
    assert mis.abs().max() == 0.0
    assert stats["is/over_cap_frac"] == 1.0 and tis_stats["is/weight_mean"] == pytest.approx(1.5)
    assert stats["is/ratio_max"] > 1e20


def test_on_policy_samples_are_unchanged_by_the_correction(learner_gradient, tiny) -> None:
    """Generator logprobs equal to the learner's: rho = 1 on every token and tis equals no correction."""
    from tiny_model import PAD

    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    samples = lsp_batch()
    plain, _ = learner_gradient(samples, loss="clipped", token_budget=10_000)
    scored = Learner(copy.deepcopy(tiny), LearnerConfig(lr=1e-3, beta=0.0), PAD, 1.0, None).score(samples, 1.0)
    for s, lp in zip(samples, scored, strict=True):
        s.logprobs = lp
    tis, stats = learner_gradient(samples, loss="clipped", token_budget=10_000, importance={"mode": "tis", "cap": 1.01})
    close32(tis, plain)
    assert stats["is/ratio_mean"] == approx32(1.0) and stats["is/over_cap_frac"] == 0.0


@pytest.mark.parametrize("mode", ["tis", "mis"])
def test_micro_batched_equals_full_batch_with_the_correction(learner_gradient, mode: str) -> None:
    samples = lsp_batch()
    for i, s in enumerate(samples):  # ratios on both sides of the cap
        s.logprobs = [-(1.0 + 0.7 * ((i + t) % 5)) for t in range(len(s.completion_ids))]
    cfg = {"loss": "clipped", "share_prompt_prefix": False, "importance": {"mode": mode, "cap": 2.0}}
    full, stats = learner_gradient(samples, token_budget=10_000, **cfg)
    micro, micro_stats = learner_gradient(samples, token_budget=24, **cfg)
    assert micro_stats["micro_batches"] > 3
    close32(micro, full)
    for key in ("is/ratio_mean", "is/weight_mean", "is/over_cap_frac"):
        assert micro_stats[key] == approx32(stats[key])
    assert 0.0 < stats["is/over_cap_frac"] < 1.0 and math.isfinite(stats["is/ratio_mean"])


def test_a_bad_cap_is_a_config_error() -> None:
    from pydantic import ValidationError

    from arena.learners.config import LearnerConfig

    with pytest.raises(ValidationError, match="cap"):
        LearnerConfig(importance={"mode": "tis", "cap": 0.5})
    with pytest.raises(ValidationError, match="mode"):
        LearnerConfig(importance={"mode": "ppo"})
