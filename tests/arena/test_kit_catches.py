"""The conformance kit catches what a new author gets wrong: bugs planted in copies of the example game.

Each planted bug is one a game author makes in an afternoon; the kit's message
names the seat and the phase.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.core.game import Phase
from arena.testing import check_game

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from lowest_unique import LowestUniqueGame, LowestUniqueObservation  # noqa: E402


class TallyObservation(LowestUniqueObservation):
    lowest_so_far: int | None = None


class LeaksParsedValues(LowestUniqueGame):
    """Shows each seat the lowest number picked so far in the open (hidden) phase: a parsed value, not raw text."""

    observation_type = TallyObservation

    def observe_seat(self, seat: str) -> TallyObservation:
        picked = [a for a in self._actions.values() if isinstance(a, int)]
        base = super().observe_seat(seat)
        return TallyObservation(**base.model_dump(), lowest_so_far=min(picked) if picked else None)


class ClaimsZeroSum(LowestUniqueGame):
    """Declares zero-sum, but pays the winner 1 and everyone else 0."""

    zero_sum = True


class ZeroSum(ClaimsZeroSum):
    """The fix: the winner's prize is paid by the others."""

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        super().close_phase(phase, actions)
        mean = sum(self.rewards.values()) / len(self.rewards)
        for seat in actions:
            self.credit(seat, "pick", -mean)
        return None


class GlobalRandom(LowestUniqueGame):
    """Draws k from the global generator instead of the one it is given."""

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.bonus = random.randint(0, 10**9)
        return super().setup(rng, options)

    def observe_seat(self, seat: str) -> LowestUniqueObservation:
        # % 10**6, not a small modulus: with % 7 two games drew the same k one time in 7 and
        # the kit (rightly) saw nothing, a flaky test.
        return super().observe_seat(seat).model_copy(update={"k": self.config.k + self.bonus % 10**6})


class RaisingParser(LowestUniqueGame):
    """int() on the raw text: raises on anything that is not a bare number."""

    def parse(self, seat: str, text: str) -> Any:
        return int(text)


def test_the_example_passes() -> None:
    check_game(lambda: LowestUniqueGame())
    check_game(lambda: ZeroSum())


def test_catches_a_parsed_value_leaking_from_a_hidden_phase() -> None:
    with pytest.raises(AssertionError, match=r"phase 'pick' \(occurrence 0\) is hidden, but what seat_\d sees changes "
                                             r"with what seat_\d.* wrote in it"):
        check_game(lambda: LeaksParsedValues())


def test_catches_rewards_that_do_not_sum_to_zero() -> None:
    with pytest.raises(AssertionError, match=r"declares zero_sum, but the rewards of the episode sum to .*seat_0="):
        check_game(lambda: ClaimsZeroSum())


def test_catches_global_random_state() -> None:
    with pytest.raises(AssertionError, match=r"seed 0, step 0: seat_0's observation in phase 'pick' differs.*global random"):
        check_game(lambda: GlobalRandom())


def test_catches_a_parser_that_raises() -> None:
    with pytest.raises(AssertionError, match=r"seat_0 in phase 'pick': the game raised ValueError"):
        check_game(lambda: RaisingParser())
