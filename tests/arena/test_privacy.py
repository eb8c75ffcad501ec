"""Declared private information (#37): ``Phase(audience=...)``, ``LLMGame.draw_private`` and the kit's checks of them.

The private-offer game and its two planted leaks are in ``test_kit_catches.py``; here are
the declarations' own rules and a public phase with an audience (whispers passed in turn).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from arena.core.game import GameConfig, Invalid, LLMGame, Phase
from arena.core.messages import Message
from arena.core.types import ChatMessage
from arena.testing import check_game, check_hidden_outputs, check_private_draws, check_private_replies
from tests.fixtures.private_offers import SEATS as OFFER_SEATS
from tests.fixtures.private_offers import PrivateOffersGame

SEATS = ("ann", "bob", "cat")
NEXT = {"ann": "bob", "bob": "cat", "cat": "ann"}


def test_an_audience_is_validated_and_frozen() -> None:
    phase = Phase("offer", ("a", "b", "c"), audience={"a": ["b"], "b": ("a", "c")})
    assert phase.may_see("b", "a") and phase.may_see("a", "a") and not phase.may_see("c", "a")
    assert not phase.may_see("a", "c")  # a writer left out of the mapping writes for itself alone
    assert phase.audience == {"a": ("b",), "b": ("a", "c")}
    assert copy.deepcopy(phase) == pickle.loads(pickle.dumps(phase)) == phase  # search and workers copy games
    assert hash(phase) == hash(Phase("offer", ("a", "b", "c")))
    assert phase.kept_until == "episode" and Phase("x", ("a",)).kept_until is None
    assert Phase("x", ("a",), sealed="forever", audience={}).kept_until == "forever"
    assert Phase("x", ("a",)).may_see("b", "a")  # no audience: the phase's hidden/sealed rules decide
    with pytest.raises(ValueError, match=r"audience names writer\(s\) z who do not act in it"):
        Phase("offer", ("a", "b"), audience={"z": ["a"]})
    with pytest.raises(ValueError, match=r"audience\['a'\] must be a list of seats, not the string 'b' "
                                         r"\(write \['b'\]\)"):
        Phase("offer", ("a", "b"), audience={"a": "b"})
    with pytest.raises(ValueError, match=r"audience maps each writer seat"):
        Phase("offer", ("a", "b"), audience="a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"a sealed phase must be hidden \(hidden=True\) or declare who may see"):
        Phase("say", ("a",), hidden=False, sealed="episode")
    Phase("say", ("a", "b"), hidden=False, sealed="forever", audience={"a": ["b"]})


def test_draw_private_moves_the_generator_as_a_plain_draw_would() -> None:
    game = PrivateOffersGame()
    game.reset(seed=5)
    values, after = dict(game.values), game.rng.integers(2**62)
    assert game.private_seats == set(OFFER_SEATS)
    redrawn = PrivateOffersGame()
    redrawn.kit_redraw = ("seat_2", np.random.default_rng(99))
    redrawn.reset(seed=5)
    assert redrawn.rng.integers(2**62) == after  # the seed's stream is untouched
    others = [s for s in OFFER_SEATS if s != "seat_2"]
    assert [redrawn.values[s] for s in others] == [values[s] for s in others]
    assert redrawn.values["seat_2"] == int(np.random.default_rng(99).integers(10, 101))
    game.private_seats.add("stale")
    game.reset(seed=5)
    assert "stale" not in game.private_seats



class WhisperObservation(Message):
    phase: str
    heard: str = ""  # the whisper addressed to this seat, raw
    overheard: str = ""


class WhisperGame(LLMGame[WhisperObservation, GameConfig]):
    """A public phase ``whisper`` (ann, bob, cat in turn; each whispers to the next seat, who reads it at once),
    then a hidden ``guess``. Each seat sees only the whisper addressed to it."""

    metadata = {"name": "whisper_v0", "render_modes": ["ansi"]}
    config_type = GameConfig
    observation_type = WhisperObservation
    phases = ("whisper", "guess")
    sealed: Any = None

    def seat_names(self) -> Sequence[str]:
        return list(SEATS)

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        return Phase("whisper", SEATS, hidden=False, audience={s: [NEXT[s]] for s in SEATS}, sealed=self.sealed)

    def whispers(self) -> dict[str, str]:
        return self.outputs("whisper", 0)

    def observe_seat(self, seat: str) -> WhisperObservation:
        said = self.whispers()
        sender = next(s for s in SEATS if NEXT[s] == seat)
        return WhisperObservation(phase=self.phase.name if not self.done else "done", heard=said.get(sender, ""))

    def render_messages(self, obs: WhisperObservation) -> list[ChatMessage]:
        return [{"role": "user", "content": f"You heard {obs.heard!r} {obs.overheard}. Whisper a word, then guess."}]

    def parse(self, seat: str, text: str) -> Any:
        return text.strip() or Invalid(reason="say something")

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        return Phase("guess", SEATS) if phase.name == "whisper" else None

    def action_examples(self, seat: str) -> Sequence[str]:
        return ["owl", "heron", "stag beetle"]  # of different lengths: a leaked length shows


class OverhearsWhileOpen(WhisperGame):
    """cat also reads what ann whispered to bob, while the phase is still open (raw text)."""

    def observe_seat(self, seat: str) -> WhisperObservation:
        obs = super().observe_seat(seat)
        return obs.model_copy(update={"overheard": self.whispers().get("ann", "")}) if seat == "cat" else obs


class OverhearsItsLength(WhisperGame):
    """cat is told the length of ann's whisper to bob: no raw text, a value computed from it."""

    def observe_seat(self, seat: str) -> WhisperObservation:
        obs = super().observe_seat(seat)
        letters = f"{len(self.whispers().get('ann', ''))} letters"
        return obs.model_copy(update={"overheard": letters}) if seat == "cat" else obs


class RevealsAllAtTheEnd(WhisperGame):
    """Once the game is over every seat is shown every whisper: right unless the phase is sealed forever."""

    def observe_seat(self, seat: str) -> WhisperObservation:
        obs = super().observe_seat(seat)
        return obs.model_copy(update={"overheard": str(sorted(self.whispers().values()))}) if self.done else obs


class SealedForeverButRevealsAtTheEnd(RevealsAllAtTheEnd):
    sealed = "forever"


def test_a_public_phase_with_an_audience() -> None:
    check_game(lambda: WhisperGame())
    with pytest.raises(AssertionError, match=r"phase \('whisper', 0\) shows each reply to its audience only .* but cat "
                                             r"can see ann's output"):
        check_hidden_outputs(lambda: OverhearsWhileOpen())
    with pytest.raises(AssertionError, match=r"phase 'whisper' \(occurrence 0\) shows ann's reply only to bob, but what "
                                             r"cat sees changes with it at bob's move in phase 'whisper' \(occurrence 0\), "
                                             r"while the phase is open"):
        check_game(lambda: OverhearsItsLength())


def test_sealed_forever_keeps_an_audience_in_the_final_views() -> None:
    check_game(lambda: RevealsAllAtTheEnd())
    with pytest.raises(AssertionError, match=r"shows ann's reply only to bob, but what cat sees changes with it in the "
                                             r"final views, once the episode is over, after the phase closed"):
        check_private_replies(lambda: SealedForeverButRevealsAtTheEnd())


def test_games_that_declare_nothing_private_are_not_replayed() -> None:
    from tests.fixtures.rps import RPSGame

    check_private_replies(lambda: RPSGame())
    check_private_draws(lambda: RPSGame())


class SealedOffers(PrivateOffersGame):
    """The private-offer game with its offers also sealed: a sealed phase with an audience keeps replies with it."""

    sealed: Any = "episode"

    def offer_phase(self) -> Phase:
        return dataclasses.replace(super().offer_phase(), sealed=self.sealed)


class SealedForeverOffers(SealedOffers):
    sealed = "forever"


@pytest.mark.parametrize("game", [SealedOffers, SealedForeverOffers])
def test_sealing_a_phase_with_an_audience_lets_the_audience_see(game: type[PrivateOffersGame]) -> None:
    check_game(lambda: game(), seeds=(0,))


class AddressesAStranger(WhisperGame):
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        return Phase("whisper", SEATS, hidden=False, audience={"ann": ["bobby"]})


def test_an_audience_naming_no_seat_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"phase 'whisper' \(occurrence 0\): the audience of ann names bobby, not "
                                             r"seats of this game \(ann, bob, cat\)"):
        check_private_replies(lambda: AddressesAStranger())


class NewValuesEachRound(PrivateOffersGame):
    """Every seat's value is drawn again at the start of each round, with draw_private, after setup."""

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        nxt = super().close_phase(phase, actions)
        if phase.name == "reply":
            self.values = {s: self.draw_private(s, self.rng, lambda r: int(r.integers(10, 101))) for s in OFFER_SEATS}
        return nxt


class TellsSeat2TheNewValueOfSeat0(NewValuesEachRound):
    def observe_seat(self, seat: str) -> Any:
        obs = super().observe_seat(seat)
        if seat == "seat_2" and self.round == 2 and not self.done:
            return obs.model_copy(update={"log": (*obs.log, f"seat_0 now values its unit at {self.values['seat_0']}")})
        return obs


def test_a_secret_drawn_after_setup_is_varied_too() -> None:
    check_private_draws(lambda: NewValuesEachRound())
    with pytest.raises(AssertionError, match=r"what seat_2 sees changes when only seat_0's private draw \(draw_private\) "
                                             r"is drawn again, at seat_0's move in phase 'offer' \(occurrence 2\)"):
        check_private_draws(lambda: TellsSeat2TheNewValueOfSeat0())
