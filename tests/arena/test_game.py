"""The LLMGame base: bookkeeping, hidden phases, seeding; and the kit catching a broken game."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict, Field

from arena.core.game import GameConfig, Invalid, LLMGame, Phase
from arena.core.messages import CompletionSpace, Message, MessageSpace
from arena.core.types import ChatMessage
from arena.testing import check_game, check_hidden_outputs


class EchoConfig(GameConfig):
    seats: int = Field(default=3, ge=2)
    leak: bool = False
    rounds: int = Field(default=1, ge=1, description="The 'say' phase repeats this many times.")


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: int | None = None


class EchoObs(Message):
    phase: str
    me: str
    others: tuple[str, ...] = ()


class EchoGame(LLMGame[EchoObs, EchoConfig]):
    """Each seat says a number; the largest wins. ``leak`` breaks the hidden phase on purpose."""

    metadata = {"name": "echo_v0", "render_modes": ["ansi"]}
    config_type = EchoConfig
    options_type = EchoOptions
    observation_type = EchoObs
    phases = ("say",)

    def seat_names(self) -> Sequence[str]:
        return [f"s_{i}" for i in range(self.config.seats)]

    def setup(self, rng: np.random.Generator, options: EchoOptions) -> Phase:
        self.target = int(rng.integers(10)) if options.target is None else options.target
        self.seat_roles = {s: "speaker" for s in self.possible_agents}
        return Phase("say", tuple(self.possible_agents))

    def observe_seat(self, seat: str) -> EchoObs:
        seen = self._open_outputs.values() if self.config.leak else ()
        return EchoObs(phase=self.phase.name, me=seat, others=tuple(seen))

    def render_messages(self, observation: EchoObs) -> list[ChatMessage]:
        return [{"role": "user", "content": f"Say a digit. Seen: {observation.others}"}]

    def parse(self, seat: str, text: str) -> Any:
        digits = [c for c in text if c in "0123456789"]
        return int(digits[-1]) if digits else Invalid(reason="no digit")

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        said = {s: a for s, a in actions.items() if not isinstance(a, Invalid)}
        if said:
            best = max(said.values())
            for s, a in said.items():
                self.credit(s, "say", 1.0 if a == best else 0.0)
        return phase if self.phase_index + 1 < self.config.rounds else None

    def action_examples(self, seat: str) -> Sequence[str]:
        return ["3", "9"]


def test_a_correct_toy_game_passes_the_kit() -> None:
    check_game(lambda: EchoGame())


def test_the_kit_catches_a_leaking_game() -> None:
    with pytest.raises(AssertionError, match="hidden"):
        check_hidden_outputs(lambda: EchoGame(leak=True))


def test_outputs_of_an_open_hidden_phase_are_refused() -> None:
    env = EchoGame()
    env.reset(seed=0)
    env.step("5")
    with pytest.raises(PermissionError):
        env.outputs("say")


def test_rewards_booked_per_turn_and_in_pettingzoo() -> None:
    env = EchoGame()
    env.reset(seed=0)
    for text in ["5", "7", "x"]:
        env.step(text)
    assert env.terminations == {a: True for a in env.agents}
    assert [t.reward for t in env.turns] == [0.0, 1.0, 0.0]
    assert env._cumulative_rewards["s_1"] == 1.0
    assert env.turns[2].valid is False and env.infos["s_2"]["invalid"] == 1
    ep = env.episode()
    assert ep.rewards == {"s_0": 0.0, "s_1": 1.0, "s_2": 0.0}


def test_reset_without_seed_continues_the_generator() -> None:
    a, b = EchoGame(), EchoGame()
    a.reset(seed=3)
    b.reset(seed=3)
    assert a.episode_id == b.episode_id
    a.reset()
    b.reset()
    assert a.episode_id == b.episode_id
    a.reset(seed=4)
    assert a.episode_id != b.episode_id


def test_spaces() -> None:
    space = CompletionSpace(["ok"], seed=1)
    assert space.contains("") and space.contains("\x00") and not space.contains(3)
    assert all(isinstance(space.sample(), str) for _ in range(50))
    obs_space = MessageSpace(EchoObs, seed=2)
    for _ in range(20):
        assert obs_space.contains(obs_space.sample())
    assert not obs_space.contains({"phase": "say", "me": "s_0"})


def test_options_reach_setup_and_are_validated() -> None:
    env = EchoGame()
    env.reset(seed=0, options={"target": 7})
    assert env.target == 7 and env.options == {"target": 7}
    with pytest.raises(ValueError, match="target"):
        env.reset(seed=0, options={"target": "high"})
    with pytest.warns(UserWarning, match="reset ignores unknown option"):  # as PettingZoo expects
        env.reset(seed=0, options={"spy": 1})
    assert env.options == {}
    with pytest.raises(ValueError, match="extra"):  # configs validate strictly
        EchoGame.validate_options({"spy": 1})


def test_repeated_phases_keep_every_occurrence() -> None:
    env = EchoGame(rounds=3, seats=2)
    env.reset(seed=1)
    for text in ["1", "2", "3", "4", "5", "6"]:
        env.step(text)
    assert env.done
    assert [(t.phase, t.phase_index) for t in env.turns] == [("say", 0)] * 2 + [("say", 1)] * 2 + [("say", 2)] * 2
    assert env.outputs("say", 0) == {"s_0": "1", "s_1": "2"} and env.outputs("say") == {"s_0": "5", "s_1": "6"}
    assert [t.reward for t in env.turns] == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]  # credit lands on each occurrence
    check_hidden_outputs(lambda: EchoGame(rounds=3))  # marks of an earlier, closed occurrence are no leak


def test_a_step_limit_ends_the_episode_as_a_truncation() -> None:
    env = EchoGame(rounds=5, seats=2, max_turns=3)
    env.reset(seed=0)
    for text in ["1", "2", "3"]:
        env.step(text)
    assert env.done and all(env.truncations.values()) and not any(env.terminations.values())
    ep = env.episode()
    assert ep.truncated and ep.info["truncation"] == "step limit of 3 turns" and len(ep.turns) == 3
    assert ep.outcome == {}  # a truncated game has no result
    while env.agents:
        env.step(None)


def test_outcome_ranks_share_ties() -> None:
    env = EchoGame(seats=4)
    env.reset(seed=0)
    for text in ["9", "3", "9", "x"]:
        env.step(text)
    outcome = env.episode().outcome
    assert {s: (o.score, o.rank) for s, o in outcome.items()} == {
        "s_0": (1.0, 1), "s_1": (0.0, 3), "s_2": (1.0, 1), "s_3": (0.0, 3)
    }


def test_each_prompt_is_rendered_once_per_state() -> None:
    calls: list[str] = []

    class Counting(EchoGame):
        def render_messages(self, observation: EchoObs) -> list[ChatMessage]:
            calls.append(observation.me)
            return super().render_messages(observation)

    env = Counting(seats=2)
    env.reset(seed=0)
    env.prompt("s_0")
    env.prompt("s_0")
    env.step("4")  # the recorded turn reuses the prompt the request was built from
    assert calls == ["s_0"]
    assert env.turns[0].messages == Counting(seats=2).render_messages(EchoObs(phase="say", me="s_0"))


def test_the_kit_checks_replay_with_cross_episode_state() -> None:
    from tests.fixtures.quiz import Library, QuizGame

    check_game(lambda: QuizGame())  # a frozen snapshot (a tuple) replays exactly

    class LiveLibrary(Library):
        def snapshot(self) -> list[str]:  # hands the envs the live list: updates leak into replays
            return self.questions

    class LeakyQuiz(QuizGame):
        state_type = LiveLibrary

    with pytest.raises(AssertionError, match="snapshot is not frozen"):
        check_game(lambda: LeakyQuiz())


def test_a_finished_game_needs_no_done_observation() -> None:
    class NoDoneState(EchoGame):
        def observe_seat(self, seat: str) -> EchoObs:
            if self.done:
                raise RuntimeError("observe_seat called on a finished game")
            return super().observe_seat(seat)

    check_game(lambda: NoDoneState())
    env = NoDoneState()
    env.reset(seed=0)
    before = env.observe("s_2")
    for text in ["1", "2", "3"]:
        env.step(text)
    assert env.done and env.observe("s_2") == before
