"""What a game can declare to the kit since #53, and what the kit does with it: replies that name their own
audience (``Phase(addressed=True)``), joint deals and reveals (``deal_private``, ``reveal_private``), a secret
that changes the course of play (checked before it does, and a warning, never silence), rule invariants
(``team_zero_sum``, ``out_of_game``), and errors that name the seed, the seat and the phase."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from arena.core.game import GameConfig, Invalid, LLMGame, Phase
from arena.core.messages import Message
from arena.core.types import ChatMessage
from arena.testing import KitWarning, check_declared_invariants, check_game, check_hidden_outputs, check_private_draws
from tests.fixtures.direct_messages import FOUR, DirectMessages, InboxObservation
from tests.fixtures.werewolf import WerewolfGame

class GossipsWhoWroteToWhom(DirectMessages):
    """Every seat is told who wrote to whom: not the text, but what the reply named."""

    def observe_seat(self, seat: str) -> InboxObservation:
        obs = super().observe_seat(seat)
        if self.phase.name != "read":
            return obs
        sent = self.actions("dm", 0)
        return obs.model_copy(update={"gossip": tuple(f"{s}->{a[0]}" for s, a in sent.items() if isinstance(a, tuple))})


class ReadsEveryInbox(DirectMessages):
    """Once the messages are sent, every seat reads all of them, as written."""

    def inbox(self, seat: str) -> tuple[str, ...]:
        return () if self.phase.name == "dm" and not self.done else tuple(self.outputs("dm", 0).values())


def test_a_reply_can_name_its_own_audience() -> None:
    with pytest.raises(ValueError, match=r"give audience .* or addressed=True .* not both"):
        Phase("dm", FOUR, addressed=True, audience={"ann": ["bob"]})
    env = DirectMessages()
    env.reset(seed=0)
    env.step("to cat: hello")
    env.step("no recipient")
    assert env.reply_seen_by("dm", 0, "ann") == ("cat",) and env.reply_seen_by("dm", 0, "bob") == ()
    assert env.reply_seen_by("dm", 0, "cat") is None  # not written yet
    check_game(lambda: DirectMessages())


def test_what_an_addressed_reply_names_or_says_reaches_no_one_else() -> None:
    with pytest.raises(AssertionError, match=r"seed 0: phase 'dm' \(occurrence 0\) shows ann's reply only to \w+, \w+, "
                                             r"but what \w+ sees changes with it at \w+'s move in phase 'read'"):
        check_game(lambda: GossipsWhoWroteToWhom())
    with pytest.raises(AssertionError, match=r"seed 0: phase \('dm', 0\) shows each reply to its audience only \(kept "
                                             r"until 'episode'\) but \w+ can see \w+'s output after it closed"):
        check_hidden_outputs(lambda: ReadsEveryInbox())


class LeaderObservation(Message):
    role: str
    phase: str
    told: str = ""


class Leader(LLMGame[LeaderObservation, GameConfig]):
    """Roles dealt from one deck: one leader, two followers. The leader speaks; then one ``echo`` phase per place
    the leader sits after seat_0. Every redraw that moves the leader changes the course of play."""

    metadata = {"name": "leader_v0", "render_modes": ["ansi"]}
    config_type = GameConfig
    observation_type = LeaderObservation
    phases = ("speak", "echo")
    seats = ("seat_0", "seat_1", "seat_2")

    def seat_names(self) -> Sequence[str]:
        return list(self.seats)

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.seat_roles = self.deal_private(self.seats, rng, lambda r: list(r.permutation(["leader", "f", "f"])))
        self.leader = next(s for s, r in self.seat_roles.items() if r == "leader")
        self.echoes = self.seats.index(self.leader)
        return Phase("speak", (self.leader,))

    def parse(self, seat: str, text: str) -> Any:
        return text.strip() or Invalid(reason="say something")

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        if self.echoes == 0:
            return None
        self.echoes -= 1
        return Phase("echo", self.seats)

    def observe_seat(self, seat: str) -> LeaderObservation:
        return LeaderObservation(role=self.seat_roles[seat], phase=self.phase.name)

    def render_messages(self, obs: LeaderObservation) -> list[ChatMessage]:
        return [{"role": "user", "content": f"{obs.role} {obs.phase} {obs.told}"}]

    def action_examples(self, seat: str) -> Sequence[str]:
        return ["yes", "no"]


class LeaderNamedAtTheStart(Leader):
    def observe_seat(self, seat: str) -> LeaderObservation:
        return super().observe_seat(seat).model_copy(update={"told": f"{self.leader} leads"})


def test_a_secret_that_always_changes_the_course_warns_and_is_still_checked_before_it_does() -> None:
    with pytest.warns(KitWarning, match=r"seed 0: the kit could not fully check the private deal: of 12 redraws, none "
                                        r"kept the course of play .*; \d+ of them only before the first phase closed"):
        check_private_draws(lambda: Leader(), seed=0)
    with pytest.raises(AssertionError, match=r"seed 0: what seat_\d sees changes when the private deal \(deal_private\) "
                                             r"is dealt again, though seat_\d's own dealt value is the same .* at the "
                                             r"start, before any move"):
        check_private_draws(lambda: LeaderNamedAtTheStart(), seed=0)


class SeerWithoutReveal(WerewolfGame):
    """The fixture without its reveal_private: the seer's vision is then a leak of the deal to the seer."""

    def reveal_private(self, owner: str, to: str) -> None:
        pass


def test_a_vision_the_rules_grant_is_declared_with_reveal_private() -> None:
    env = WerewolfGame()
    env.reset(seed=0)
    assert sorted(env.private_dealt) == sorted(env.possible_agents) and env.private_reveals == []
    assert sorted(v for vs in env.private_dealt.values() for v in vs) == sorted(["werewolf", "seer", *["villager"] * 3])
    with pytest.raises(AssertionError, match=r"what player_\d sees changes when the private deal \(deal_private\) is "
                                             r"dealt again.* at player_\d's move in phase 'talk' \(occurrence 1\)"):
        check_private_draws(lambda: SeerWithoutReveal(), seed=0)
    with pytest.raises(ValueError, match=r"deal_private: the deal gave 2 values for 3 seats"):
        env.deal_private(("a", "b", "c"), env.rng, lambda r: [1, 2])


class ComesBack(WerewolfGame):
    """The dead are counted among the living again in the second vote."""

    def out_of_game(self) -> list[str]:
        return [] if (self.phase.name, self.phase_index) == ("vote", 1) else super().out_of_game()


class NoTeams(WerewolfGame):
    def team(self, seat: str) -> str | None:
        return None


def test_declared_invariants() -> None:
    check_declared_invariants(lambda: WerewolfGame(), seed=0)
    with pytest.raises(AssertionError, match=r"seed 0: player_\d came back into the game before player_\d's move in "
                                             r"phase 'vote' \(occurrence 1\): out_of_game named it out before"):
        check_declared_invariants(lambda: ComesBack(), seed=0)
    with pytest.raises(AssertionError, match=r"declares team_zero_sum, but team\('player_0'\) is None \(seed 0\)"):
        check_declared_invariants(lambda: NoTeams(), seed=0)


class SetupRaises(WerewolfGame):
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        raise IndexError("no such seat")


class ObserveRaises(WerewolfGame):
    def observe_seat(self, seat: str) -> Any:
        if self.phase.name == "vote":
            raise KeyError(seat)
        return super().observe_seat(seat)


def test_what_a_game_raises_names_the_seed_the_seat_and_the_phase() -> None:
    with pytest.raises(AssertionError, match=r"seed 0: reset raised IndexError: no such seat \(in setup, "
                                             r"tests/arena/test_kit_declarations.py:\d+\)"):
        check_game(lambda: SetupRaises())
    with pytest.raises(AssertionError, match=r"seed 0: player_0 in phase 'vote' \(occurrence 0\): the game raised "
                                             r"KeyError: 'player_\d' \(in observe_seat, .*\) while showing player_\d"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KitWarning)
            check_game(lambda: ObserveRaises())
