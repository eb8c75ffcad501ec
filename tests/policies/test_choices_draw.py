"""arena/policies/choices.py's draw among a request's choices, on hand-built scores (fast, no model; in
``make mutation``): the index drawn is the documented one, ``P(i) = softmax(l)_i`` of the scores as given, at
any temperature.

The scores ``policy.score`` hands ``choose`` are ``log pi_T`` already, tempered once by the sampling transform;
a draw that applied the temperature again (softmax(l / T)) agreed with the right one at T = 0 and T = 1 and
survived (#53): the frequency test at T = 2 (tests/games/test_openspiel_score.py) needs the model and tells
0.92 from 0.63, not 0.57 from 0.63. Here every seed's draw is checked exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena.policies.base import Request, SamplingParams
from arena.policies.choices import choose, draw, normalise

CHOICES = ["Pass", "Bet", "Fold"]
IDS = [[11, 0], [12, 13, 0], [14, 0]]
# Per-token log pi_T of each choice: l = log 0.6, log 0.3, log 0.1, less 1.5 (P = 0.6, 0.3, 0.1 after normalising).
SCORED = [[-0.25, math.log(0.6) - 1.25], [-1.0, 0.5, math.log(0.3) - 1.0], [-2.0, math.log(0.1) + 0.5]]
TOP = max(sum(s) for s in SCORED)
LSE = TOP + math.log(sum(math.exp(sum(s) - TOP) for s in SCORED))  # the module docstring's normaliser, about -1.5


def first_index(u: float, probs: list[float]) -> int:
    """The documented draw, by hand: the first i with u < P(0) + ... + P(i)."""
    total = 0.0
    for i, p in enumerate(probs):
        total += p
        if u < total:
            return i
    return len(probs) - 1


@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 2.0])
def test_each_seed_draws_the_documented_index_at_any_temperature(temperature: float) -> None:
    request = Request(messages=[{"role": "user", "content": "?"}], choices=CHOICES,
                      params=SamplingParams(temperature=temperature))
    probs = normalise([sum(s) for s in SCORED])
    drawn = []
    for seed in range(300):
        expected = first_index(float(np.random.default_rng(seed).random()), probs)
        done = choose(request, [1, 2], IDS, SCORED, seed)
        assert done.text == CHOICES[expected], seed
        assert done.completion_ids == IDS[expected] and done.alternatives == [c for j, c in enumerate(IDS) if j != expected]
        assert done.finish_reason == "stop" and done.prompt_ids == [1, 2]
        assert done.logprobs[:-1] == SCORED[expected][:-1]
        assert done.logprobs[-1] == SCORED[expected][-1] - LSE  # sum(logprobs) = l_i - logsumexp(l) = log P(i)
        drawn.append(expected)
    assert sorted(set(drawn)) == [0, 1, 2] and 150 < drawn.count(0) < 210  # 0.6 of 300: all three are drawn


def test_normalise_and_draw_by_hand() -> None:
    assert normalise([math.log(3.0), math.log(1.0)]) == [0.75, 0.25]
    assert normalise([0.0, 0.0, 0.0, 0.0]) == [0.25] * 4
    assert normalise([1000.0, 1000.0]) == [0.5, 0.5]  # stable: no overflow
    for seed in range(50):
        u = float(np.random.default_rng(seed).random())
        assert draw([0.5, 0.5], seed) == int(u >= 0.5)
        assert draw([0.0, 1.0], seed) == 1 and draw([1.0, 0.0], seed) == 0
    assert draw([0.1, 0.1, 0.0], 0) == 1  # a short total leaves u above it: the last index of positive probability


def test_no_choice_or_no_mass_is_one_line() -> None:
    request = Request(messages=[], choices=[], params=SamplingParams(top_p=0.5))
    with pytest.raises(ValueError, match=r"^a request with choices needs at least one \(got an empty list\)$"):
        choose(request, [], [], [], 0)
    request = Request(messages=[], choices=["a", "b"], params=SamplingParams(top_p=0.5))
    with pytest.raises(ValueError, match=r"^every choice has probability 0 under top_p=0.5 \(choices: a, b\); raise "
                                         r"top_p$"):
        choose(request, [], [[1], [2]], [[-math.inf], [-math.inf]], 0)
    many = [f"c{k}" for k in range(14)]  # the message names the first 12
    request = Request(messages=[], choices=many, params=SamplingParams(top_p=0.5))
    with pytest.raises(ValueError, match=r"\(choices: c0, c1, .*, c11\); raise top_p$"):
        choose(request, [], [[k] for k in range(14)], [[-math.inf]] * 14, 0)
