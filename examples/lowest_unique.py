"""A new self-play game in one file: "lowest unique number".

Every seat secretly writes an integer from 1 to ``k``; the seat whose number is
the lowest one that nobody else chose wins 1, everyone else 0 (nobody wins if
no number is unique). The whole game is the rules below plus ~40 lines of
wiring; the conformance kit then checks it the way every built-in game is
checked.

Seats: ``seat_0 .. seat_{n-1}``. One hidden phase ``pick``. Action grammar: the
last integer in the completion; out of range or none -> invalid (abstains).

    .venv/bin/python examples/lowest_unique.py
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from arena import (
    ChatMessage, GameConfig, Invalid, LLMGame, Message, Phase,
    Runner, ScriptedPolicy, check_game, format_episode,
)


class LowestUniqueConfig(GameConfig):  # GameConfig brings `invalid` (na | penalty | retry)
    n_players: int = Field(default=4, ge=2, le=32)
    k: int = Field(default=10, ge=2, le=1000, description="Numbers range over 1..k.")


class LowestUniqueObservation(Message):
    seat_index: int
    n_players: int
    k: int


def winner(picks: dict[str, int]) -> str | None:
    """The seat with the lowest number chosen exactly once, or None."""
    counts = Counter(picks.values())
    unique = [(v, s) for s, v in picks.items() if counts[v] == 1]
    return min(unique)[1] if unique else None


class LowestUniqueGame(LLMGame[LowestUniqueObservation, LowestUniqueConfig]):
    metadata = {"name": "lowest_unique_v0", "render_modes": ["ansi"]}
    config_type = LowestUniqueConfig
    observation_type = LowestUniqueObservation
    phases = ("pick",)

    def seat_names(self) -> Sequence[str]:
        return [f"seat_{i}" for i in range(self.config.n_players)]

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        return Phase("pick", tuple(self.possible_agents))  # every seat's role is the default, "player"

    def observe_seat(self, seat: str) -> LowestUniqueObservation:
        return LowestUniqueObservation(seat_index=int(seat.split("_")[1]), n_players=self.config.n_players, k=self.config.k)

    def render_messages(self, obs: LowestUniqueObservation) -> list[ChatMessage]:
        return [{"role": "user", "content": (
            f"{obs.n_players} players each secretly pick a whole number from 1 to {obs.k}. The player with the "
            "lowest number that nobody else picked wins. Think, then end with your number."
        )}]

    def parse(self, seat: str, text: str) -> Any:
        numbers = re.findall(r"\d{1,6}", text)
        if not numbers:
            return Invalid(reason="no number")
        value = int(numbers[-1])
        return value if 1 <= value <= self.config.k else Invalid(reason=f"{value} is outside 1..{self.config.k}")

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        picks = {s: a for s, a in actions.items() if not isinstance(a, Invalid)}
        won = winner(picks)
        for seat in actions:
            self.credit(seat, "pick", 1.0 if seat == won else 0.0)
        return None

    def action_examples(self, seat: str) -> Sequence[str]:
        return [str(v) for v in range(1, self.config.k + 1)]


def cautious_bot(obs: LowestUniqueObservation, rng: np.random.Generator) -> str:
    """Picks a small number, more often the smallest ones."""
    return f"I will go low: {1 + int(rng.geometric(0.4)) % obs.k}"


def main(episodes: int = 3) -> None:
    check_game(lambda: LowestUniqueGame(), bot=cautious_bot)
    print("conformance kit: passed")
    runner = Runner(lambda: LowestUniqueGame(n_players=4), {"bots": ScriptedPolicy(cautious_bot)}, num_envs=episodes)
    for ep in runner.play(list(range(episodes))):
        print(format_episode(ep, max_chars=200))


if __name__ == "__main__":
    main()
