"""Entropy where the decision is: ``learner.choice_entropy`` over a chosen reply's choices (score mode) and
``learner.token_entropy`` over the whole vocabulary at each generated token (free generation),
arena/learners/regularisers.py. Checked on an explicit softmax against its closed-form gradient, and in the
learner against a reference loop over whole sequences, micro-batched as full-batch."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import PAD, flat_grad, seq_log_softmax

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.losses import choice_entropy
from arena.learners.regularisers import choice_log_softmax, token_entropy
from arena.learners.update import Learner
from tolerance import LOGITS, approx32, approx64, close32, close64

T = 0.9
CHOICES = [[20, 1], [21, 22, 1], [23, 1]]


def test_token_entropy_and_its_gradient_on_an_explicit_softmax() -> None:
    """``H = -sum p log p`` and ``dH / d theta_j = -p_j (log p_j + H)``, on float64 logits."""
    theta = torch.tensor([[[0.3, -1.2, 2.0, 0.0], [5.0, 5.0, 5.0, 5.0]]], dtype=torch.float64, requires_grad=True)
    h = token_entropy(torch.log_softmax(theta, -1))
    p = torch.softmax(theta.detach(), -1)
    want = -(p * p.log()).sum(-1)
    close64(h.detach(), want)
    assert float(h.detach()[0, 1]) == approx64(float(torch.log(torch.tensor(4.0, dtype=torch.float64))))
    h.sum().backward()
    close64(theta.grad, -p * (p.log() + want[..., None]))  # type: ignore[arg-type]


def test_a_token_of_probability_zero_adds_nothing_and_no_nan() -> None:
    theta = torch.tensor([[[0.0, float("-inf"), 1.0]]], requires_grad=True)
    h = token_entropy(torch.log_softmax(theta, -1))
    p = torch.softmax(torch.tensor([0.0, 1.0]), 0)
    assert float(h.detach()) == approx32(float(-(p * p.log()).sum()))
    h.sum().backward()
    assert torch.isfinite(theta.grad).all()  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_the_choice_table_matches_choice_entropy() -> None:
    """The table the magnet reads (chosen reply first, then its alternatives) gives ``choice_entropy``'s values;
    a row without alternatives has no valid cell."""
    own, alt, owner = torch.tensor([-3.0, -0.5, -5.0]), torch.tensor([-1.0, -4.0, -5.0]), [0, 0, 2]
    logq, valid = choice_log_softmax(own, alt, owner)
    assert valid.tolist() == [[True, True, True], [False, False, False], [True, True, False]]
    assert logq[0].tolist() == approx32(torch.log_softmax(torch.tensor([-3.0, -1.0, -4.0]), 0).tolist())
    h = -(logq.exp() * logq * valid).sum(-1)
    close32(h, choice_entropy(own, alt, owner))
    # no NaN anywhere in the backward, the row without choices included (anomaly mode checks every function)
    own, alt = own.clone().requires_grad_(), alt.clone().requires_grad_()
    with torch.autograd.detect_anomaly():
        logq, valid = choice_log_softmax(own, alt, owner)
        (-(logq.exp() * logq * valid).sum()).backward()
    assert torch.isfinite(own.grad).all() and own.grad[1] == 0.0  # type: ignore[index, union-attr]


def samples() -> list[Sample]:
    out = [Sample(prompt_ids=p, completion_ids=CHOICES[r], advantage=[1.0, -0.5, 2.0][r], weight=[1.0, 0.5, 1.5][r],
                  alternatives=[c for j, c in enumerate(CHOICES) if j != r])
           for r, p in enumerate([[5, 6, 7, 8], [5, 6, 9], [5, 6, 7, 11, 12]])]
    out += [Sample(prompt_ids=[5, 13], completion_ids=[30, 31, 1], advantage=-1.0, weight=0.7),
            Sample(prompt_ids=[5, 6, 14], completion_ids=[40, 41, 42, 1], advantage=0.8)]
    return out


def reference_gradient(tiny: Any, batch: list[Sample], choice: float, token: float) -> tuple[torch.Tensor, float]:
    """REINFORCE at ratio 1 (token mean) minus ``choice`` x the mean choice entropy over chosen replies minus
    ``token`` x the token mean (weighted by each sample's weight) of the full-vocabulary entropy at generated
    tokens; and that token term's value."""
    model = copy.deepcopy(tiny)
    n_tokens = sum(len(s.completion_ids) for s in batch)
    n_choices = sum(bool(s.alternatives) for s in batch)
    loss, token_term = torch.zeros(()), torch.zeros(())

    def scored(c: list[int], prompt: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        full = seq_log_softmax(model, prompt, c, T)
        return full, full.gather(-1, torch.tensor(c)[:, None]).squeeze(-1)

    for s in batch:
        full, tok = scored(s.completion_ids, s.prompt_ids)
        log_p = tok.sum()
        if s.alternatives:
            every = torch.stack([log_p, *[scored(a, s.prompt_ids)[1].sum() for a in s.alternatives]])
            q = torch.log_softmax(every, 0)
            log_p = q[0]
            loss = loss + choice * (q.exp() * q).sum() / n_choices
        else:
            h = -(full.exp() * full).sum(-1)
            token_term = token_term + s.weight * h.sum() / n_tokens
        loss = loss - s.advantage * s.weight * log_p / n_tokens
    (loss - token * token_term).backward()
    return flat_grad(model), float(token_term.detach())


@pytest.mark.parametrize("budget", [10_000, 6])
@pytest.mark.parametrize(("choice", "token"), [(0.0, 0.2), (0.3, 0.2)])
def test_the_entropy_bonuses_have_the_reference_gradient(tiny: Any, learner_gradient: Any, budget: int,
                                                         choice: float, token: float) -> None:
    batch = samples()
    want, token_value = reference_gradient(tiny, batch, choice, token)
    got, stats = learner_gradient(batch, temperature=T, loss="reinforce", token_budget=budget, share_prefix_min_tokens=1,
                                  choice_entropy=choice, token_entropy=token)
    assert budget > 100 or stats["micro_batches"] >= 3
    close32(got, want)
    assert (want - reference_gradient(tiny, batch, choice, 0.0)[0]).abs().max() > 1e-4  # the bonus moves it
    assert stats["token_entropy"] == approx32(token_value, scale=LOGITS)
    assert ("choice_entropy" in stats) == (choice > 0)
