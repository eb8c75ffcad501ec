"""LLMGame's phase and invalid-output logic, value by value, on a small game with a PUBLIC phase.

``RelayGame``: seats call a digit one after another in a public phase (each sees the calls
so far), then bet on the calls' sum modulo 10 in a hidden phase. Rewards: a correct bet
earns 1; in the public phase the highest call earns 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import Field

from arena.core.game import GameConfig, Invalid, LLMGame, Phase
from arena.core.messages import Message
from arena.core.types import ChatMessage
from arena.runner import Runner, request_seed
from arena.testing import check_game
from arena.policies.base import Completion, Request


class RelayConfig(GameConfig):
    seats: int = Field(default=3, ge=2, description="Seats.")
    first: str = Field(default="call", description="Name of the public phase.")


class RelayObs(Message):
    phase: str
    me: str
    calls: tuple[str, ...] = ()


class RelayGame(LLMGame[RelayObs, RelayConfig]):
    metadata = {"name": "relay_v0", "render_modes": ["ansi"]}
    config_type = RelayConfig
    observation_type = RelayObs
    phases = ("call", "bet")

    def seat_names(self) -> Sequence[str]:
        return [f"r_{i}" for i in range(self.config.seats)]

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.seat_roles = {s: ("lead" if s == "r_0" else "follower") for s in self.possible_agents}
        return Phase("call", tuple(self.possible_agents), hidden=False)

    def observe_seat(self, seat: str) -> RelayObs:
        name = self.phase.name if not self.done else "done"
        calls = tuple(self.outputs("call", 0).values()) if self._occurrences.get("call") else ()
        return RelayObs(phase=name, me=seat, calls=calls)

    def render_messages(self, observation: RelayObs) -> list[ChatMessage]:
        return [{"role": "user", "content": f"{observation.phase}: calls so far {list(observation.calls)}"}]

    def parse(self, seat: str, text: str) -> Any:
        digits = [c for c in text if c in "0123456789"]
        if not digits:
            return Invalid(reason="no digit")
        if self.phase.name == "call" and digits[-1] == seat.rsplit("_", 1)[1]:
            return Invalid(reason="a seat may not call its own number")
        return int(digits[-1])

    def probe_prompts(self, seat: str) -> dict[str, list[ChatMessage]]:
        return {"bare": [{"role": "user", "content": f"{seat}: say a digit"}]}

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        valid = {s: a for s, a in actions.items() if not isinstance(a, Invalid)}
        if phase.name == "call":
            self.calls = valid
            if valid:
                top = max(valid.values())
                self.credit_phase("call", {s: 0.5 for s, a in valid.items() if a == top})
            return Phase("bet", tuple(reversed(self.possible_agents)))
        total = sum(self.calls.values()) % 10
        for s, a in valid.items():
            self.credit(s, "bet", 1.0 if a == total else 0.0)
        return None

    def action_examples(self, seat: str) -> Sequence[str]:
        return ["1", "7"]


def test_the_relay_game_passes_the_kit() -> None:
    check_game(lambda: RelayGame())


def test_a_public_phase_shows_each_seat_the_calls_so_far() -> None:
    env = RelayGame()
    env.reset(seed=0)
    assert env.phase == Phase("call", ("r_0", "r_1", "r_2"), hidden=False)
    assert env.pending_seats() == ["r_0"], "a public phase generates one seat at a time"
    env.step("I call 4")
    assert env.outputs("call") == {"r_0": "I call 4"}, "an open public phase shows what is written so far"
    assert env.observe("r_1").calls == ("I call 4",)
    assert env.pending_seats() == ["r_1"]
    env.step("7")
    assert env.observe("r_2").calls == ("I call 4", "7")
    env.step("3")
    # the hidden phase: every seat at once, in the phase's own order; nothing readable while open
    assert env.phase.name == "bet" and env.pending_seats() == ["r_2", "r_1", "r_0"]
    assert env.agent_selection == "r_2"
    env.step("4")
    with pytest.raises(PermissionError, match="'bet' is still open"):
        env.outputs("bet")
    assert env.pending_seats() == ["r_1", "r_0"]
    env.step("9")
    env.step("4")
    assert env.done and env.pending_seats() == [] and env.agent_selection == "r_0"
    with pytest.raises(ValueError, match="dead"):
        env.step("a dead seat may only pass None")
    assert env.outputs("bet") == {"r_2": "4", "r_1": "9", "r_0": "4"}
    # (4 + 7 + 3) % 10 = 4: r_2 and r_0 bet right; r_1's call 7 was the highest
    ep = env.episode()
    assert ep.rewards == {"r_0": 1.0, "r_1": 0.5, "r_2": 1.0}
    assert [(t.seat, t.phase, t.reward) for t in ep.turns] == [
        ("r_0", "call", 0.0), ("r_1", "call", 0.5), ("r_2", "call", 0.0),
        ("r_2", "bet", 1.0), ("r_1", "bet", 0.0), ("r_0", "bet", 1.0),
    ]
    assert [t.role for t in ep.turns[:2]] == ["lead", "follower"]
    assert ep.turns[4].probes == {"bare": [{"role": "user", "content": "r_1: say a digit"}]}
    assert ep.turns[1].messages == [{"role": "user", "content": "call: calls so far ['I call 4']"}]
    assert ep.turns[3].group == {"episode": env.episode_id, "phase": "bet", "role": "follower"}
    assert [t.index for t in ep.turns] == list(range(6)) and all(t.phase_index == 0 for t in ep.turns)


def test_pettingzoo_rewards_arrive_at_the_step_that_earned_them() -> None:
    env = RelayGame(seats=2)
    env.reset(seed=0)
    env.step("5")
    env.step("2")  # closes 'call': r_0's 5 is the top call
    assert env.rewards == {"r_0": 0.5, "r_1": 0.0}
    assert env._cumulative_rewards == {"r_0": 0.5, "r_1": 0.0}
    env.step("7")  # r_1 bets (hidden phase order is reversed)
    assert env.rewards == {"r_0": 0.0, "r_1": 0.0}, "rewards of a step are cleared at the next"
    assert env._cumulative_rewards["r_1"] == 0.0 and env._cumulative_rewards["r_0"] == 0.5
    env.step("7")
    assert env.rewards == {"r_0": 1.0, "r_1": 1.0}
    assert env._cumulative_rewards == {"r_0": 1.0, "r_1": 1.0}, "a seat's own step restarts its sum (PettingZoo)"


@pytest.mark.parametrize(
    ("mode", "expected_call", "expected_info"),
    [("na", [0.0, 0.5, 0.0], {"invalid": 1, "retries": 0}), ("penalty", [-2.0, 0.5, 0.0], {"invalid": 1, "retries": 0})],
)
def test_invalid_output_in_a_public_phase(mode: str, expected_call: list[float], expected_info: dict) -> None:
    env = RelayGame(invalid={"mode": mode, "penalty": -2.0})
    env.reset(seed=0)
    env.step("no idea")
    assert env.turns[0].valid is False and env.turns[0].invalid_reason == "no digit" and env.turns[0].action is None
    assert env.outputs("call") == {"r_0": "no idea"}, "the raw text is still what others see"
    env.step("8")
    env.step("1")
    assert [t.reward for t in env.turns] == expected_call
    assert env.infos["r_0"] == expected_info and env.infos["r_1"] == {"invalid": 0, "retries": 0}
    assert env.calls == {"r_1": 8, "r_2": 1}, "an invalid call reaches close_phase as an abstention"


def test_retry_then_the_next_seat() -> None:
    env = RelayGame(invalid={"mode": "retry", "retries": 1, "penalty": -0.25})
    env.reset(seed=0)
    env.step("hmm")
    assert env.agent_selection == "r_0" and env.pending_seats() == ["r_0"]
    assert env.rewards["r_0"] == -0.25 and env._cumulative_rewards["r_0"] == -0.25
    prompt = env.prompt("r_0")
    assert prompt[1:] == [
        {"role": "assistant", "content": "hmm"},
        {"role": "user", "content": "Your reply could not be used (no digit). Reply again, following the required format exactly."},
    ]
    env.step("hmm again")
    assert env.agent_selection == "r_1", "budget of one retry spent: the seat abstains"
    assert [t.reward for t in env.turns] == [-0.25, -0.25]
    assert env.prompt("r_1") == [{"role": "user", "content": "call: calls so far ['hmm again']"}]
    env.step("2")
    env.step("3")
    env.step("1")
    assert env.agent_selection == "r_1" and len(env.prompt("r_1")) == 1, "attempts reset with the phase"


class FlakyBot:
    """A scripted policy that answers garbage on a seat's first attempt in each phase, then a digit."""

    name = "flaky"

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for req in requests:
            self.requests.append(req)
            retry = any(m["role"] == "assistant" for m in req.messages)
            out.append(Completion(text="3" if retry else "no number, sorry"))
        return out


def test_retry_mode_with_a_policy_invalid_then_valid() -> None:
    policy = FlakyBot()
    runner = Runner(lambda: RelayGame(invalid={"mode": "retry", "retries": 2, "penalty": -0.5}), {"flaky": policy}, num_envs=1)
    (ep,) = runner.play([5])
    assert [(t.seat, t.phase, t.valid, t.retried) for t in ep.turns] == [
        (s, p, v, not v) for p, seats in (("call", ["r_0", "r_1", "r_2"]), ("bet", ["r_2", "r_1", "r_0"]))
        for s in seats for v in (False, True)
    ]
    # calls 3, 3, 3 (all top: 0.5 each); sum 9 != bet 3; each seat paid -0.5 twice
    assert ep.rewards == {s: pytest.approx(-0.5) for s in ("r_0", "r_1", "r_2")}
    assert [t.reward for t in ep.turns_of(phase="call")] == [-0.5, 0.5, -0.5, 0.5, -0.5, 0.5]
    first, again = policy.requests[0], policy.requests[1]
    assert first.seed == request_seed(ep.episode_id, "call", "r_0", 0)
    assert again.seed == request_seed(ep.episode_id, "call", "r_0", 1) != first.seed
    assert again.messages[-2:] == [
        {"role": "assistant", "content": "no number, sorry"},
        {"role": "user", "content": "Your reply could not be used (no digit). Reply again, following the required format exactly."},
    ]


def test_truncation_and_dead_steps() -> None:
    env = RelayGame(max_turns=4)
    env.reset(seed=0)
    for text in ("1", "2", "3"):
        env.step(text)
    assert not env.done
    env.step("6")
    assert env.done and all(env.truncations.values()) and not any(env.terminations.values())
    assert env.agent_selection == "r_0" and env.pending_seats() == []
    ep = env.episode()
    assert ep.truncated and ep.info == {"truncation": "step limit of 4 turns"} and ep.outcome == {}
    env.truncate("again")
    assert env.episode().info == {"truncation": "step limit of 4 turns"}, "truncating a finished game changes nothing"
    n = len(env.turns)
    for agent in list(env.agents):
        env.step(None)  # PettingZoo's dead steps
    assert len(env.turns) == n and not env.agents


def test_truncate_mid_phase_by_the_runner() -> None:
    env = RelayGame()
    env.reset(seed=0)
    env.step("1")
    env.truncate("context full")
    assert env.done and env.episode().info == {"truncation": "context full"}
    assert env.episode().rewards == {"r_0": 0.0, "r_1": 0.0, "r_2": 0.0}


def test_the_parser_gets_the_seat() -> None:
    env = RelayGame()
    env.reset(seed=0)
    env.step("0")
    env.step("0")
    assert env.turns[0].invalid_reason == "a seat may not call its own number" and env.turns[1].valid


def test_actions_that_are_not_strings() -> None:
    env = RelayGame()
    env.reset(seed=0)
    env.step(None)  # a live seat given None: empty text, invalid
    env.step(7)
    assert [t.completion for t in env.turns] == ["", "7"]
    assert env.turns[0].valid is False and env.turns[1].action == "7"


def test_credit_errors_and_occurrences() -> None:
    env = RelayGame()
    env.reset(seed=0)
    with pytest.raises(KeyError, match=r"credit: r_1 has no turn in phase 'call' \(occurrence 0\)"):
        env.credit("r_1", "call", 1.0)
    with pytest.raises(KeyError) as raised:
        env.credit("r_0", "bet", 1.0)
    assert raised.value.args[0] == (
        "credit: r_0 has no turn in phase 'bet' (occurrence -1: it has not opened yet); a reward is booked on a turn "
        "the seat took in that phase occurrence: credit a phase it acted in (its last turn is the last of self.turns "
        "with that seat) or pass occurrence="
    )
    env.step("4")
    env.credit("r_0", "call", 0.25, occurrence=0)
    env.credit("r_0", "call", 0.5)
    assert env.turns[0].reward == 0.75 and env.rewards["r_0"] == 0.75
    with pytest.raises(KeyError):
        env.credit("r_0", "call", 1.0, occurrence=1)


class EmptyPhaseGame(RelayGame):
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        return Phase("call", ())


def test_a_phase_without_seats_is_a_game_bug() -> None:
    with pytest.raises(ValueError, match="phase 'call' has no seats"):
        EmptyPhaseGame().reset(seed=0)


class TwiceGame(RelayGame):
    """The public phase runs twice; the second time it is hidden."""

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        for s, a in actions.items():
            if not isinstance(a, Invalid):
                self.credit(s, "call", float(a))
        if self.phase_index == 0:
            return Phase("call", ("r_1", "r_0"), hidden=True)
        return None


def test_a_repeated_phase_keeps_each_occurrences_outputs_turns_and_rewards() -> None:
    env = TwiceGame(seats=2)
    env.reset(seed=0)
    env.step("1")
    env.step("2")
    assert env.phase_index == 1 and env.pending_seats() == ["r_1", "r_0"]
    assert env.outputs("call", 0) == {"r_0": "1", "r_1": "2"}
    with pytest.raises(PermissionError):
        env.outputs("call")
    assert env.outputs("bet", 1) == {} and env.outputs("bet") == {}, "another phase's missing occurrence is empty"
    env.step("5")
    env.step("6")
    assert env.outputs("call") == {"r_1": "5", "r_0": "6"} and env.outputs("call", 0) == {"r_0": "1", "r_1": "2"}
    assert env.outputs("bet") == {} and env.outputs("call", 7) == {}
    assert [(t.seat, t.phase_index, t.reward) for t in env.turns] == [("r_0", 0, 1.0), ("r_1", 0, 2.0), ("r_1", 1, 5.0), ("r_0", 1, 6.0)]
