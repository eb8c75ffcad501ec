"""The average policy's supervised target (arena/loop/components/average.py): the update on a record is the
NLL of the move among its legal choices, by an independent reference, and its minimiser is the moves'
frequency at a state (fictitious play's average there)."""

from __future__ import annotations

import copy
import random

import torch
from tiny_model import PAD, tiny_llama

from arena.loop.components.average import record_sample, reservoir_add
from tolerance import close32, within


def choice_nll_reference(model: torch.nn.Module, prompt: list[int], chosen: list[int], others: list[list[int]]) -> torch.Tensor:
    """``- log softmax_j(l_j)[chosen]``, ``l_j`` the summed log-probability of choice ``j`` as the reply, by hand."""
    def reply(ids: list[int]) -> torch.Tensor:
        x = torch.tensor([prompt + ids])
        logp = torch.log_softmax(model(input_ids=x).logits[0, len(prompt) - 1:-1].float(), -1)
        return logp.gather(-1, torch.tensor(ids)[:, None]).sum()

    scores = torch.stack([reply(chosen)] + [reply(o) for o in others])
    return -(scores[0] - torch.logsumexp(scores, 0))


def test_the_supervised_step_is_the_nll_of_the_move_among_its_choices() -> None:
    """The average model's update on one record (advantage 1, REINFORCE with the ratio's denominator detached)
    has the gradient of ``- log pi(a | s)`` over the legal replies: computed independently, by hand."""
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    base = tiny_llama()
    record = {"prompt_ids": [5, 6, 7, 8], "completion_ids": [9, 2], "alternatives": [[11, 2], [12, 13, 2]]}
    model = copy.deepcopy(base)
    learner = Learner(model, LearnerConfig(lr=1e-3, beta=0.0, loss="reinforce", estimators={}), PAD, 1.0, None)
    captured: list[torch.Tensor] = []

    def capture() -> float:
        captured.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone())
        model.zero_grad(set_to_none=True)
        return 0.0

    learner._optimizer_step = capture  # type: ignore[method-assign]
    learner.step([record_sample(record)])
    ref = copy.deepcopy(base)
    choice_nll_reference(ref, record["prompt_ids"], record["completion_ids"], record["alternatives"]).backward()
    want = torch.cat([p.grad.flatten() for p in ref.parameters() if p.grad is not None])
    # the learner's loss is a token mean: one record's chosen reply of 2 tokens divides by 2
    close32(captured[0] * len(record["completion_ids"]), want)


def test_supervision_converges_to_the_moves_frequency_at_a_state() -> None:
    """Seven records of one move and three of the other at one state: the average model's probability of the
    first goes to 0.7, the minimiser of the records' NLL (fictitious play's average at that state)."""
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    torch.manual_seed(0)
    model = tiny_llama()
    learner = Learner(model, LearnerConfig(lr=3e-3, beta=0.0, loss="reinforce", estimators={}), PAD, 1.0, None)
    a, b = [9, 2], [11, 2]
    records = ([{"prompt_ids": [5, 6, 7], "completion_ids": a, "alternatives": [b]}] * 7
               + [{"prompt_ids": [5, 6, 7], "completion_ids": b, "alternatives": [a]}] * 3)
    for _ in range(150):
        learner.step([record_sample(r) for r in records])
    with torch.no_grad():
        nll = float(choice_nll_reference(model, [5, 6, 7], a, [b]))
    assert torch.exp(torch.tensor(-nll)).item() == within(0.7, 0.03, "150 full-batch steps at lr 3e-3")


def test_the_reservoir_keeps_each_record_with_equal_probability() -> None:
    """After n records a buffer of k holds each with probability k / n (Vitter's algorithm R): counted over
    4,000 seeded runs, the first, a middle and the last record are each kept 1,000 / 4,000 = 25% of the time."""
    n, k, runs = 40, 10, 4000
    kept = {0: 0, 20: 0, 39: 0}
    for seed in range(runs):
        rng, buffer, seen = random.Random(seed), [], 0
        for r in range(n):
            seen = reservoir_add(buffer, seen, r, k, rng)
        assert len(buffer) == k and seen == n
        for r in kept:
            kept[r] += r in buffer
    for r, count in kept.items():
        assert count / runs == within(k / n, 0.03, "4,000 runs: 4.4 standard errors of a 25% rate"), r


def test_the_reservoir_is_a_first_come_buffer_until_full() -> None:
    buffer: list[int] = []
    seen = 0
    rng = random.Random(0)
    for r in range(5):
        seen = reservoir_add(buffer, seen, r, 8, rng)
    assert buffer == [0, 1, 2, 3, 4] and seen == 5


class Drawn:
    """A ``random.Random`` stand-in that answers ``randrange(n)`` with a set slot and remembers ``n``."""

    def __init__(self, slot: int):
        self.slot, self.asked = slot, []

    def randrange(self, n: int) -> int:
        self.asked.append(n)
        return self.slot


def test_a_full_reservoir_draws_among_seen_plus_one_slots_and_keeps_the_record_only_inside() -> None:
    """Algorithm R by hand: after 5 records in a buffer of 2, the 6th draws from ``randrange(6)``; slot 1 is
    replaced, slot 2 (outside the buffer) replaces nothing."""
    buffer = ["a", "b"]
    rng = Drawn(1)
    assert reservoir_add(buffer, 5, "f", 2, rng) == 6 and buffer == ["a", "f"] and rng.asked == [6]
    rng = Drawn(2)
    assert reservoir_add(buffer, 6, "g", 2, rng) == 7 and buffer == ["a", "f"] and rng.asked == [7]


def test_a_turn_record_is_its_prompt_move_and_choices_as_lists() -> None:
    from types import SimpleNamespace

    from arena.loop.components.average import turn_record

    turn = SimpleNamespace(prompt_ids=(1, 2, 3), completion_ids=(7,), alternatives=((8,), (9, 10)))
    record = turn_record(turn)
    assert record == {"prompt_ids": [1, 2, 3], "completion_ids": [7], "alternatives": [[8], [9, 10]]}
    assert all(type(v) is list for v in record.values()) and all(type(a) is list for a in record["alternatives"])
