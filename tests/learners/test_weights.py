"""Sample and token weights in the update, on a tiny Llama: hand values, reference gradients, micro-batching."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch

from arena.core.types import Episode, Sample, Turn
from arena.learners.config import LearnerConfig
from arena.learners.estimators import EstimatorStates
from arena.learners.samples import build_samples
from arena.learners.update import pack
from tiny_model import flat_grad, seq_log_softmax
from tolerance import apart, approx32, close32

# Two samples with asymmetric advantages, weights and token weights (swapping any would change the numbers).
ADV = [1.0, -2.0]
WEIGHTS = [0.5, 2.0]
TOKEN_W = [[1.0, 3.0], [0.5, 1.0, 2.0]]


def weighted_samples(weights=WEIGHTS, token_w=TOKEN_W) -> list[Sample]:
    return [
        Sample(prompt_ids=[5, 6, 7], completion_ids=[9, 10], advantage=ADV[0], weight=weights[0], token_weights=token_w[0]),
        Sample(prompt_ids=[8, 11], completion_ids=[12, 13, 14], advantage=ADV[1], weight=weights[1],
               token_weights=token_w[1]),
    ]


@pytest.mark.parametrize("loss", ["reinforce", "clipped"])
def test_loss_value_is_the_hand_computed_weighted_token_mean(learner_gradient: Any, loss: str) -> None:
    # On-policy the ratio is 1, so each token's loss is -A_b * w_bt, times the sample weight;
    # token aggregation divides by the batch's 5 tokens:
    # (0.5 * -1 * (1 + 3) + 2.0 * 2 * (0.5 + 1 + 2)) / 5 = (-2 + 14) / 5 = 2.4
    _, stats = learner_gradient(weighted_samples(), loss=loss)
    assert stats["loss"] == pytest.approx(2.4) and stats["pg_loss"] == pytest.approx(2.4)
    # swapped sample weights: (2.0 * -4 + 0.5 * 7) / 5 = -0.9
    _, swapped = learner_gradient(weighted_samples(weights=[2.0, 0.5]), loss=loss)
    assert swapped["loss"] == pytest.approx(-0.9)


def reference_gradient(tiny: Any, samples: list[Sample], n_tokens: float) -> torch.Tensor:
    """sum_b weight_b * sum_t -A_b * w_bt * grad log pi(y_bt) / n_tokens, one sequence at a time."""
    model = copy.deepcopy(tiny)
    total = torch.zeros(())
    for s in samples:
        logp = seq_log_softmax(model, s.prompt_ids, s.completion_ids)
        tok = logp.gather(-1, torch.tensor(s.completion_ids)[:, None]).squeeze(-1)
        w = torch.tensor(s.token_weights or [1.0] * len(s.completion_ids))
        total = total + s.weight * (-s.advantage * w * tok).sum() / n_tokens
    total.backward()
    return flat_grad(model)


def test_weighted_gradient_equals_a_reference_loop(tiny: Any, learner_gradient: Any) -> None:
    samples = weighted_samples()
    grad, _ = learner_gradient(samples, loss="reinforce", share_prompt_prefix=False)
    # The gradient's entries reach 75, so float32 rounding of the batched forward (one layout, two rows) against
    # the loop's reaches 1e-5 on small entries (1.5e-6 on an AVX512 host); in float64 the two agree to 2e-15.
    close32(grad, reference_gradient(tiny, samples, 5.0))
    swapped, _ = learner_gradient(weighted_samples(weights=[2.0, 0.5]), loss="reinforce")
    assert apart(grad, swapped, 1e-4), "the per-sample weights matter"
    reversed_tw, _ = learner_gradient(weighted_samples(token_w=[[3.0, 1.0], [2.0, 1.0, 0.5]]), loss="reinforce")
    assert apart(grad, reversed_tw, 1e-4), "the per-token weights matter"


def test_a_zero_weight_sample_contributes_nothing(tiny: Any, learner_gradient: Any) -> None:
    samples = weighted_samples(weights=[0.0, 2.0])
    grad, _ = learner_gradient(samples, loss="reinforce")
    close32(grad, reference_gradient(tiny, samples[1:], 5.0))


def test_unit_weights_are_bit_identical_to_no_weights(learner_gradient: Any) -> None:
    plain = [s.model_copy(update={"weight": 1.0, "token_weights": None}) for s in weighted_samples()]
    ones = [s.model_copy(update={"weight": 1.0, "token_weights": [1.0] * len(s.completion_ids)}) for s in plain]
    a, sa = learner_gradient(plain, beta=0.01)
    b, sb = learner_gradient(ones, beta=0.01)
    gaps = sa.pop("logprob_gap"), sb.pop("logprob_gap")  # NaN: the samples carry no generator logprobs
    assert torch.equal(a, b) and sa == sb and all(math.isnan(g) for g in gaps)


def many_samples(n: int = 7) -> list[Sample]:
    gen = torch.Generator().manual_seed(1)
    out = []
    for i in range(n):
        shared = i < 3  # a group with one prompt exercises the shared-prompt path
        p_len = int(torch.randint(2, 6, (1,), generator=gen))
        prompt = [3, 4, 5, 6] if shared else torch.randint(1, 64, (p_len,), generator=gen).tolist()
        t = int(torch.randint(1, 6, (1,), generator=gen))
        comp = torch.randint(1, 64, (t,), generator=gen).tolist()
        out.append(Sample(
            prompt_ids=prompt, completion_ids=comp, advantage=float(torch.randn(1, generator=gen)),
            weight=float(torch.rand(1, generator=gen)) * 2, token_weights=(torch.rand(t, generator=gen) * 2).tolist(),
        ))
    return out


@pytest.mark.parametrize("aggregation", ["token", "sequence", "constant"])
@pytest.mark.parametrize("share", [True, False])
def test_micro_batching_does_not_change_the_weighted_gradient(learner_gradient: Any, aggregation: str, share: bool) -> None:
    samples = many_samples()
    longest = max(s.length for s in samples)
    assert len(pack(samples, 10_000, share)) <= 2 and len(pack(samples, longest, share)) >= 5
    cfg = dict(beta=0.05, kl_estimator="k3", loss="clipped", aggregation=aggregation, share_prompt_prefix=share)
    whole, s_whole = learner_gradient(samples, token_budget=10_000, **cfg)
    split, s_split = learner_gradient(samples, token_budget=longest, **cfg)
    close32(whole, split)
    assert s_whole["loss"] == approx32(s_split["loss"])
    assert s_split["micro_batches"] > s_whole["micro_batches"]


def test_token_weights_must_match_the_completion(learner_gradient: Any) -> None:
    bad = [Sample(prompt_ids=[1], completion_ids=[2, 3], advantage=1.0, token_weights=[1.0])]
    with pytest.raises(ValueError, match="1 token_weights for 2 completion tokens"):
        learner_gradient(bad)


def test_per_phase_loss_weights_from_build_samples(tiny: Any, learner_gradient: Any) -> None:
    """LSP-style ``L = L_solve + 0.25 * L_challenge``: the phases' weights reach the loss and gradient."""
    def turn(i: int, phase: str, reward: float, completion: list[int]) -> Turn:
        return Turn(index=i, seat=f"s{i}", role="r", phase=phase, messages=[], completion="x", reward=reward,
                    group={"episode": "e"}, policy="p", prompt_ids=[2, 3 + i], completion_ids=completion)

    ep = Episode(episode_id="e", game="g_v0", turns=[
        turn(0, "challenge", -1.0, [5, 6]), turn(1, "challenge", 0.0, [7]),
        turn(2, "solve", 1.0, [8, 9, 10]), turn(3, "solve", 0.0, [11, 12]),
    ])
    cfg = LearnerConfig(estimators={
        "challenge": {"name": "lsp_challenger", "loss_weight": 0.25},
        "solve": {"name": "lsp_solver", "group_by": ["episode"], "loss_weight": 1.5},
    })
    samples, _ = build_samples([ep], ["challenge", "solve"], cfg, EstimatorStates(cfg.estimators), "p")
    assert [(s.advantage, s.weight) for s in samples] == [(-0.5, 0.25), (0.5, 0.25), (0.5, 1.5), (-0.5, 1.5)]
    # value: sum_b weight_b * -A_b * len_b / 8 tokens = (0.25 * (1 - 0.5) + 1.5 * (-1.5 + 1)) / 8 = -0.625 / 8
    grad, stats = learner_gradient(samples, loss="reinforce", share_prompt_prefix=False)
    assert stats["loss"] == pytest.approx(-0.625 / 8)
    close32(grad, reference_gradient(tiny, samples, 8.0))
