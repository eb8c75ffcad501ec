"""The warm start's reward filter at its boundary (issue #34; fast: no model, in ``make mutation``).

``min_reward`` keeps a seat's turns when its episode return is AT LEAST the threshold: a return equal
to it is kept, one just below is not (arena/loop/components/warm_start.py ``episode_turns``).
"""

from __future__ import annotations

import pytest

from arena.core.types import Episode, Turn
from arena.loop.components.warm_start import BotsSource, episode_turns, threshold


def _turn(seat: str, role: str, text: str) -> Turn:
    return Turn(index=0, seat=seat, role=role, phase="act", messages=[{"role": "user", "content": seat}], completion=text)


EPISODE = Episode(episode_id="e", game="g", turns=[_turn("a", "solver", "at"), _turn("b", "solver", "below"),
                                                    _turn("c", "proposer", "above")],
                  rewards={"a": 0.5, "b": 0.5 - 1e-9, "c": 2.0})


@pytest.mark.parametrize(("min_reward", "kept"), [
    (0.5, ["at", "above"]),                          # equal to the bar: kept; just below: dropped
    (2.0, ["above"]),                                # equal again, at another value
    (2.0 + 1e-9, []),
    ({"solver": 0.5}, ["at", "above"]),              # per role; proposer has no bar: kept
    ({"b": 0.5 - 1e-9, "a": 0.6}, ["below", "above"]),  # per seat pattern, each at its own boundary
    (None, ["at", "below", "above"]),
])
def test_a_return_equal_to_min_reward_is_kept(min_reward, kept: list[str]) -> None:
    ws = BotsSource(source="bots", min_reward=min_reward)
    assert [c for _, c, *_ in episode_turns([EPISODE], ws, ["*"])] == kept


def test_threshold_picks_role_then_first_matching_seat_pattern() -> None:
    assert threshold(0.25, "a", "solver") == 0.25
    assert threshold({"solver": 1.0, "a": 2.0}, "a", "solver") == 1.0
    assert threshold({"x*": 3.0, "a*": 2.0, "*": 1.0}, "a_1", "solver") == 2.0
    assert threshold({"x": 3.0}, "a", "solver") is None


def test_the_other_filters_phases_validity_seats_and_length() -> None:
    turns = [Turn(index=0, seat="a", role="r", phase="bid", messages=[], completion="bid-ok"),
             Turn(index=1, seat="a", role="r", phase="play", messages=[], completion="invalid", valid=False),
             Turn(index=2, seat="a", role="r", phase="play", messages=[], completion="retried", retried=True),
             Turn(index=3, seat="b", role="r", phase="play", messages=[], completion="long", finish_reason="length"),
             Turn(index=4, seat="z", role="r", phase="play", messages=[], completion="no-return"),
             Turn(index=5, seat="a", role="r", phase="play", messages=[], completion="last")]
    ep = Episode(episode_id="e", game="g", turns=turns, rewards={"a": 1.0, "b": 1.0})
    got = episode_turns([ep], BotsSource(source="bots"), ["*"])
    assert [(c, ph, ends) for _, c, ph, _, ends in got] == [
        ("bid-ok", "bid", True), ("long", "play", False), ("no-return", "play", True), ("last", "play", True)]
    got = episode_turns([ep], BotsSource(source="bots", phases=["play"], valid_only=False), ["a", "z"])
    assert [c for _, c, *_ in got] == ["invalid", "retried", "no-return", "last"]
    got = episode_turns([ep], BotsSource(source="bots", min_reward=0.0), ["*"])
    assert [c for _, c, *_ in got] == ["bid-ok", "long", "last"]  # a seat with no return never reaches a bar
