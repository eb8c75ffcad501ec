"""The conformance kit catches what a new author gets wrong: bugs planted in copies of the example game.

Each planted bug is one a game author makes in an afternoon; the kit's message
names the seat and the phase.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.core.game import Invalid, Phase
from arena.testing import check_game, check_unparseable_is_invalid

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from lowest_unique import LowestUniqueGame, LowestUniqueObservation  # noqa: E402
from sealed_bid import BIDDERS, SealedBidGame  # noqa: E402

from tests.fixtures.private_offers import OffersObservation, PrivateOffersGame  # noqa: E402


class TallyObservation(LowestUniqueObservation):
    lowest_so_far: int | None = None


class LeaksParsedValues(LowestUniqueGame):
    """Shows each seat the lowest number picked so far in the open (hidden) phase: a parsed value, not raw text."""

    observation_type = TallyObservation

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.picked: dict[str, int] = {}  # the game's own tally (LLMGame.actions refuses an open hidden phase)
        return super().setup(rng, options)

    def parse(self, seat: str, text: str) -> Any:
        value = super().parse(seat, text)
        if isinstance(value, int):
            self.picked[seat] = value
        return value

    def observe_seat(self, seat: str) -> TallyObservation:
        picked = list(self.picked.values())
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
    with pytest.raises(AssertionError, match=r"seed 0: seat_0 in phase 'pick' \(occurrence 0\): the game raised "
                                             r"ValueError: .* \(in parse, tests/arena/test_kit_catches.py:\d+\)"):
        check_game(lambda: RaisingParser())


class SealsFirstBidsButShowsThem(SealedBidGame):
    """Declares the first-round bids sealed for the episode, but (as the example does) shows them in the final round."""

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        nxt = super().close_phase(phase, actions)
        return Phase("bid", BIDDERS, sealed="episode") if phase.name == "appraise" else nxt


class SealsFirstBids(SealsFirstBidsButShowsThem):
    """The fix: the final round no longer shows the first-round bids."""

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        nxt = super().close_phase(phase, actions)
        if phase.name == "bid":
            self.first_bids = {}
        return nxt


class DefaultsToOne(LowestUniqueGame):
    """A reply with no number silently becomes the pick 1 instead of Invalid."""

    def parse(self, seat: str, text: str) -> Any:
        parsed = super().parse(seat, text)
        return 1 if isinstance(parsed, Invalid) and parsed.reason == "no number" else parsed


class FreeTextPick(DefaultsToOne):
    """The same parser in a phase declared free_text: any reply is an action there, so the kit lets it be."""

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        return Phase("pick", tuple(self.possible_agents), free_text=True)


class FailsOnLongNumbers(LowestUniqueGame):
    """``\\d+`` then ``int()``: fine on every short reply, ValueError past Python's 4,300-digit limit."""

    def parse(self, seat: str, text: str) -> Any:
        numbers = re.findall(r"\d+", text)
        value = int(numbers[-1]) if numbers else None
        return value if value is not None and 1 <= value <= self.config.k else Invalid(reason="no number in range")


class GlobalCoin(LowestUniqueGame):
    """Tosses a coin with global ``random``: two games agree half the time, so comparing runs is not enough."""

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.coin = random.randint(0, 1)
        return super().setup(rng, options)

    def observe_seat(self, seat: str) -> LowestUniqueObservation:
        return super().observe_seat(seat).model_copy(update={"k": self.config.k + self.coin})


def test_catches_a_leak_from_a_sealed_phase_after_it_closes() -> None:
    check_game(lambda: SealsFirstBids())
    with pytest.raises(AssertionError, match=r"phase 'bid' \(occurrence 0\) is hidden, but what \w+ sees changes with "
                                             r"what bidder_0, bidder_1 wrote in it: .* after the phase closed, though it is "
                                             r"sealed='episode'"):
        check_game(lambda: SealsFirstBidsButShowsThem())


def test_catches_an_unparseable_reply_turned_into_a_default_action() -> None:
    check_unparseable_is_invalid(lambda: LowestUniqueGame())
    with pytest.raises(AssertionError, match=r"seat_\d in phase 'pick': the unparseable reply '.*' became the action '1'; "
                                             r"parse must return Invalid"):
        check_game(lambda: DefaultsToOne())
    check_unparseable_is_invalid(lambda: FreeTextPick())


def test_catches_a_parser_that_fails_only_on_long_input() -> None:
    from arena.testing import ADVERSARIAL, check_any_text_is_legal

    check_any_text_is_legal(lambda: FailsOnLongNumbers(), ADVERSARIAL)  # short replies: nothing wrong
    with pytest.raises(AssertionError, match=r"seed 0: seat_0 in phase 'pick' \(occurrence 0\): the game raised ValueError: Exceeds the limit"):
        check_game(lambda: FailsOnLongNumbers())


@pytest.mark.parametrize("global_seed", range(20))
def test_global_random_is_named_as_the_cause_every_time(global_seed: int) -> None:
    random.seed(global_seed)
    with pytest.raises(AssertionError, match=r"global random state"):
        check_game(lambda: GlobalCoin())


class RevealsBidsAtTheEnd(SealsFirstBids):
    """First-round bids sealed for the episode, shown once it is over: right for "episode", a leak for "forever"."""

    sealed = "episode"

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        nxt = super().close_phase(phase, actions)
        if phase.name == "appraise":
            return Phase("bid", BIDDERS, sealed=self.sealed)
        if nxt is None:  # the end: the first round is revealed
            self.first_bids = {b: a for b, a in self.actions("bid").items() if not isinstance(a, Invalid)}
        return nxt


class SealsForeverButRevealsAtTheEnd(RevealsBidsAtTheEnd):
    sealed = "forever"


def test_sealed_forever_is_checked_in_the_final_views() -> None:
    check_game(lambda: RevealsBidsAtTheEnd())
    with pytest.raises(AssertionError, match=r"phase 'bid' \(occurrence 0\) is hidden, but what \w+ sees changes with "
                                             r"what bidder_0, bidder_1 wrote in it: .* after the episode ended, though "
                                             r"the phase is sealed='forever'"):
        check_game(lambda: SealsForeverButRevealsAtTheEnd())


# Private information (#37): a private offer reaches its addressee only, a drawn valuation its owner only.
class ShowsOffersToAll(PrivateOffersGame):
    """Each round's offers are private to their addressees, but the next round shows them to every seat."""

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.last_round: tuple[int | None, ...] = ()
        return super().setup(rng, options)

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        if phase.name == "reply":
            self.last_round = tuple(self.offers.values())
        return super().close_phase(phase, actions)

    def observe_seat(self, seat: str) -> OffersObservation:
        obs = super().observe_seat(seat)
        return obs.model_copy(update={"log": (*obs.log, f"last round's offers: {self.last_round}")})


class LeaksAValuationInRound2(PrivateOffersGame):
    """In round 2 a seat is told its addressee's valuation, drawn for the addressee alone."""

    def observe_seat(self, seat: str) -> OffersObservation:
        obs = super().observe_seat(seat)
        if self.round == 1 and obs.addressee is not None:
            hint = f"{obs.addressee} values its unit at {self.values[obs.addressee]}"
            return obs.model_copy(update={"log": (*obs.log, hint)})
        return obs


def test_a_correct_private_offer_game_passes() -> None:
    check_game(lambda: PrivateOffersGame())


def test_catches_private_offers_shown_to_all_after_their_round() -> None:
    with pytest.raises(AssertionError, match=r"seed 0: phase 'offer' \(occurrence 0\) shows seat_0's reply only to "
                                             r"seat_1, but what seat_2 sees changes with it at seat_0's move in phase "
                                             r"'offer' \(occurrence 1\), after the phase closed"):
        check_game(lambda: ShowsOffersToAll())


def test_catches_a_drawn_valuation_leaked_to_another_seat_in_round_2() -> None:
    with pytest.raises(AssertionError, match=r"seed 0: what seat_2 sees changes when only seat_0's private draw "
                                             r"\(draw_private\) is drawn again, at seat_0's move in phase 'offer' "
                                             r"\(occurrence 1\): seat_0's secret"):
        check_game(lambda: LeaksAValuationInRound2())
