"""The LLMGame base: bookkeeping, hidden phases, seeding; and the kit catching a broken game."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict, Field

from arena.game import Invalid, InvalidOutputConfig, LLMGame, Phase
from arena.messages import CompletionSpace, Message, MessageSpace
from arena.testing import check_game, check_hidden_outputs
from arena.types import ChatMessage


class EchoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seats: int = Field(default=3, ge=2)
    leak: bool = False
    invalid: InvalidOutputConfig = Field(default_factory=InvalidOutputConfig)


class EchoObs(Message):
    phase: str
    me: str
    others: tuple[str, ...] = ()


class EchoGame(LLMGame[EchoObs, EchoConfig]):
    """Each seat says a number; the largest wins. ``leak`` breaks the hidden phase on purpose."""

    metadata = {"name": "echo_v0", "render_modes": ["ansi"]}
    config_type = EchoConfig
    observation_type = EchoObs

    def seat_names(self) -> Sequence[str]:
        return [f"s_{i}" for i in range(self.config.seats)]

    def setup(self, rng: np.random.Generator) -> Phase:
        self.target = int(rng.integers(10))
        return Phase("say", tuple(self.possible_agents))

    def role(self, seat: str) -> str:
        return "speaker"

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
        return None

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
