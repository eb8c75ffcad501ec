"""Full SpyRL games played by the real built-in model through the runner (slow)."""

from __future__ import annotations

import math

import pytest

from arena.runner import Runner
from arena.games.spy import SpyGame
from arena.policies.base import SamplingParams
from tolerance import approx64

pytestmark = pytest.mark.slow


def test_model_plays_full_spy_games(smol_fp32) -> None:
    params = SamplingParams(temperature=1.0, max_new_tokens=32)
    runner = Runner(lambda: SpyGame(n_players=4, max_words=40), {"model": smol_fp32}, sampling={"model": params}, num_envs=3)
    episodes = runner.play([11, 12, 13])
    assert len(episodes) == 3
    for ep in episodes:
        assert len(ep.turns_of(phase="perform")) >= 4 and len(ep.turns_of(phase="vote")) >= 4
        assert math.fsum(t.reward for t in ep.turns_of(phase="perform")) == approx64(0.0)
        for turn in ep.turns:
            assert turn.policy == "model"
            assert turn.prompt_ids and len(turn.completion_ids) == len(turn.logprobs) <= 32
        assert set(ep.metrics) >= {"detection_accuracy", "na_rate", "parseable_vote_rate"}
