"""A small trust region (issue #51): a clip of 0.025 over several epochs reads the logprobs from before the
first epoch in every epoch, and ``learner.bound`` stops a decision's push once its probability has moved
``move`` from that value (or sits within ``saturation`` of 0 or 1): by hand on
:func:`~arena.learners.regularisers.bound_keep`, and in the learner's second epoch against a reference loop
over whole sequences."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import PAD, flat_grad, seq_log_softmax

from arena.core.types import Sample
from arena.learners import update
from arena.learners.config import LearnerConfig
from arena.learners.regularisers import bound_keep, decision_probabilities
from arena.learners.update import Learner
from tolerance import approx32, approx64, close32

T = 0.9
CHOICES = [[20, 1], [21, 22, 1], [23, 1]]


def batch() -> list[Sample]:
    """Three chosen replies (score mode) and three generated ones."""
    out = [Sample(prompt_ids=p, completion_ids=CHOICES[r], advantage=[1.0, -0.5, 2.0][r], weight=[1.0, 0.5, 1.5][r],
                  alternatives=[c for j, c in enumerate(CHOICES) if j != r])
           for r, p in enumerate([[5, 6, 7, 8], [5, 6, 9], [5, 6, 7, 11, 12]])]
    out += [Sample(prompt_ids=[5, 13], completion_ids=[30, 31, 1], advantage=-1.0, weight=0.7),
            Sample(prompt_ids=[5, 6, 14], completion_ids=[40, 41, 42, 1], advantage=0.8),
            Sample(prompt_ids=[7, 8], completion_ids=[50, 1], advantage=-0.3)]
    return out


def test_bound_keep_by_hand() -> None:
    p0 = torch.tensor([[0.5, 0.5, 0.5, 0.5, 0.95, 0.03]])
    p = torch.tensor([[0.62, 0.58, 0.38, 0.42, 0.97, 0.02]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 2.0, -0.5]])
    # moved up 0.12 / 0.08 with A > 0; down 0.12 / 0.08 with A < 0; 0.02 and 0.01 in their advantage's direction
    assert bound_keep(p, p0, adv, 0.1, 0.0).tolist() == [[False, True, False, True, True, True]]
    # a move against the advantage is never stopped
    assert bound_keep(p0, p, adv, 0.1, 0.0).all()
    # saturation 0.05: A > 0 at p >= 0.95 stops (0.97), A < 0 at p <= 0.05 stops (0.02)
    assert bound_keep(p, p0, adv, 0.0, 0.05).tolist() == [[True, True, True, True, False, False]]
    assert bound_keep(p, p0, adv, 0.1, 0.05).tolist() == [[False, True, False, True, False, False]]
    assert bound_keep(p, p0, adv, 0.0, 0.0).all() and bound_keep(p, p0, torch.zeros_like(adv), 0.01, 0.4).all()
    edge = bound_keep(torch.tensor([[0.9]]), torch.tensor([[0.5]]), torch.tensor([[1.0]]), 0.0, 0.1)  # p = 1 - s
    assert edge.tolist() == [[False]]


def test_decision_probabilities_by_hand() -> None:
    """A chosen reply is one decision, P(chosen) = exp(row sum); a generated token is its own."""
    logp = torch.tensor([[-0.2, -0.3, 0.0], [-0.1, -0.7, -2.0]])
    old = torch.tensor([[-0.5, -0.5, 0.0], [-0.2, -0.2, -0.2]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    p, p0 = decision_probabilities(logp, old, mask, torch.tensor([True, False]))
    e = torch.exp
    assert p.tolist()[0][:2] == approx64([float(e(torch.tensor(-0.5)))] * 2)
    assert p0.tolist()[0][:2] == approx64([float(e(torch.tensor(-1.0)))] * 2)
    assert p.tolist()[1] == approx64(e(logp[1]).tolist()) and p0.tolist()[1] == approx64(e(old[1]).tolist())


class Recorder:
    """Wraps the learner's optimizer step: records each step's gradient and the weights it was taken at."""

    def __init__(self, learner: Learner):
        self.grads: list[torch.Tensor] = []
        self.weights: list[dict[str, torch.Tensor]] = []
        inner = learner._optimizer_step
        model = learner.model

        def step() -> float:
            self.grads.append(flat_grad(model).clone())
            self.weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
            return inner()

        learner._optimizer_step = step  # type: ignore[method-assign]


def run(tiny: Any, samples: list[Sample], **cfg: Any) -> tuple[Recorder, dict[str, float]]:
    cfg = {"lr": 3e-2, "beta": 0.0, "updates_per_batch": 2, "share_prefix_min_tokens": 1} | cfg
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(**cfg), PAD, T)
    rec = Recorder(learner)
    return rec, learner.step(samples)


def at(tiny: Any, weights: dict[str, torch.Tensor]) -> Any:
    model = copy.deepcopy(tiny)
    model.load_state_dict(weights)
    return model


def decisions(model: Any, s: Sample) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log-probabilities (t,) with grad, the decisions' probabilities (t,))`` of one sample: a chosen reply's
    tokens carry its normalised row (the last token minus logsumexp of the choices' ``l``) and ``P(chosen)``."""
    def tokens(c: list[int]) -> torch.Tensor:
        return seq_log_softmax(model, s.prompt_ids, c, T).gather(-1, torch.tensor(c)[:, None]).squeeze(-1)

    tok = tokens(s.completion_ids)
    if not s.alternatives:
        return tok, tok.detach().exp()
    every = torch.stack([tok.sum(), *[tokens(a).sum() for a in s.alternatives]])
    shift = torch.zeros_like(tok)
    shift[-1] = torch.logsumexp(every, 0)
    row = tok - shift
    return row, torch.full_like(tok, float(row.detach().sum().exp()))


def test_a_small_clip_reads_the_logprobs_from_before_the_first_epoch(tiny: Any, monkeypatch: Any) -> None:
    """clip 0.025, three epochs: every epoch's ratio is to the pre-update logprobs (the same tensor in each), the
    later epochs' logprobs have moved past the clip, and the third epoch's gradient is the clipped surrogate's
    with those logprobs as the old policy, computed here one sequence at a time."""
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    inner = update.clipped_surrogate

    def record(logp: torch.Tensor, old: torch.Tensor, *args: Any) -> torch.Tensor:
        seen.append((logp.detach().clone(), old.clone()))
        return inner(logp, old, *args)

    monkeypatch.setattr(update, "clipped_surrogate", record)
    samples = batch()[3:]
    rec, stats = run(tiny, samples, clip_low=0.025, clip_high=0.025, updates_per_batch=3, token_budget=10_000)
    assert len(seen) == 3
    first_logp, old = seen[0]
    close32(first_logp, old)  # the first epoch's own forward is the old policy
    assert all(torch.equal(o, old) for _, o in seen[1:])
    ratio = (seen[2][0] - old).exp()
    mask = torch.zeros_like(ratio, dtype=torch.bool)
    for r, s in enumerate(samples):
        mask[r, : len(s.completion_ids)] = True
    assert ((ratio - 1).abs() > 0.025)[mask].any() and stats["clip_frac"] > 0
    # the third epoch's gradient, by reference
    model, start = at(tiny, rec.weights[2]), at(tiny, rec.weights[0])
    n_tokens = sum(len(s.completion_ids) for s in samples)
    loss = torch.zeros(())
    for s in samples:
        now, _ = decisions(model, s)
        with torch.no_grad():
            before, _ = decisions(start, s)
        r = (now - before).exp()
        loss = loss - (s.weight * torch.minimum(r * s.advantage, r.clamp(0.975, 1.025) * s.advantage)).sum() / n_tokens
    loss.backward()
    close32(rec.grads[2], flat_grad(model))


def reference_bounded(tiny: Any, rec: Recorder, samples: list[Sample], move: float, saturation: float,
                      epoch: int) -> tuple[torch.Tensor, int]:
    """REINFORCE at ``epoch``'s weights over the decisions :func:`bound_keep` keeps (probabilities from this file's
    own loop), token-mean aggregation; and how many tokens it stopped."""
    model, start = at(tiny, rec.weights[epoch]), at(tiny, rec.weights[0])
    n_tokens = sum(len(s.completion_ids) for s in samples)
    loss, stopped = torch.zeros(()), 0
    for s in samples:
        logp, p = decisions(model, s)
        with torch.no_grad():
            _, p0 = decisions(start, s)
        up, down = s.advantage > 0, s.advantage < 0
        stop = (up & (p - p0 > move)) | (down & (p0 - p > move)) if move > 0 else torch.zeros_like(p, dtype=torch.bool)
        if saturation > 0:
            stop = stop | (up & (p >= 1 - saturation)) | (down & (p <= saturation))
        stopped += int(stop.sum())
        loss = loss - (s.advantage * s.weight * logp * (~stop)).sum() / n_tokens
    loss.backward()
    return flat_grad(model), stopped


@pytest.mark.parametrize("budget", [10_000, 6])
def test_the_move_bound_stops_what_the_first_epoch_moved(tiny: Any, budget: int) -> None:
    """bound.move: in the second epoch, a decision whose probability the first epoch moved more than ``move`` in
    its advantage's direction pushes no more. ``move`` is set between the moves measured on an unbounded run
    (the first epoch is the same with or without the bound), so some decisions stop and some do not."""
    samples = batch()
    free, _ = run(tiny, samples, loss="reinforce", token_budget=budget)
    moves = []
    with torch.no_grad():
        for s in samples:
            _, p0 = decisions(at(tiny, free.weights[0]), s)
            _, p1 = decisions(at(tiny, free.weights[1]), s)
            moves += ((p1 - p0) * (1 if s.advantage > 0 else -1)).tolist()
    ups = sorted(set(m for m in moves if m > 0))
    half = len(ups) // 2
    move = (ups[half - 1] + ups[half]) / 2  # midway between two measured moves: no decision sits on the bound
    rec, stats = run(tiny, samples, loss="reinforce", token_budget=budget, bound={"move": move})
    assert budget > 100 or stats["micro_batches"] >= 3
    close32(rec.grads[0], free.grads[0])  # the first epoch: nothing has moved yet
    want, stopped = reference_bounded(tiny, rec, samples, move, 0.0, 1)
    assert 0 < stopped < sum(len(s.completion_ids) for s in samples)
    close32(rec.grads[1], want)
    assert (want - reference_bounded(tiny, rec, samples, 0.0, 0.0, 1)[0]).abs().max() > 1e-4  # the bound matters
    assert stats["bound/stopped_frac"] == approx32(stopped / sum(len(s.completion_ids) for s in samples) / 2)


@pytest.mark.parametrize("budget", [10_000, 6])
def test_the_saturation_bound_acts_from_the_first_epoch(tiny: Any, budget: int) -> None:
    """bound.saturation (descent_bound's rule on sampled rows): a positive advantage at p >= 1 - s and a negative
    one at p <= s push nothing, already in the first epoch."""
    samples = batch()
    rec, _ = run(tiny, samples, loss="reinforce", token_budget=budget, bound={"saturation": 0.3}, updates_per_batch=1)
    want, stopped = reference_bounded(tiny, rec, samples, 0.0, 0.3, 0)
    assert 0 < stopped < sum(len(s.completion_ids) for s in samples)
    close32(rec.grads[0], want)
