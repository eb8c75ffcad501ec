"""Typed settings and observations of the TextArena adapter (spec: ``arena/games/textarena/__init__.py``)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from arena.core.game import GameConfig
from arena.core.messages import Message
from arena.games.textarena import bridge


class TextArenaConfig(GameConfig):
    """One TextArena environment as an arena game."""

    env_id: str = Field(
        default="TicTacToe-v0",
        description="TextArena environment id (TicTacToe-v0, KuhnPoker-v0, SimpleNegotiation-v0, ...).",
    )
    num_players: int = Field(default=2, ge=1, le=16, description="Players, passed to TextArena's reset.")
    error_allowance: int | None = Field(
        default=None, ge=0, le=100,
        description="TextArena's allowance of invalid moves in a row before the game ends against the "
        "offender; None keeps the env's own (1 for SPIRAL's three).",
    )
    zero_sum: bool | None = Field(
        default=None,
        description="Declare the game zero-sum (the conformance kit checks it); None: true for TicTacToe, "
        "KuhnPoker and SimpleNegotiation ids, false otherwise.",
    )
    system_prompt: str = Field(
        default=bridge.STANDARD_GAME_PROMPT,
        description="System message before TextArena's observation; default: TextArena's own agents' prompt.",
    )
    max_turns: int | None = Field(
        default=200, ge=1,
        description="Step limit (arena turns, retries included): the episode ends as a truncation after it.",
    )

    @field_validator("env_id")
    @classmethod
    def _known_id(cls, env_id: str) -> str:
        if env_id not in bridge.registry():
            raise ValueError(bridge.unknown_id_message(env_id))
        return env_id

    @model_validator(mode="after")
    def _players_fit(self) -> TextArenaConfig:
        # TextArena asserts the player count inside reset: try it now, so a bad count is a
        # config error at start-up and not a crash in the first game.
        try:
            bridge.make_env(self.env_id, self.num_players, 0, bridge.PrivateRandom(0))
        except bridge.MissingData as e:
            raise ValueError(f"env_id: {e}") from None
        except Exception as e:  # noqa: BLE001 - reported as one config line naming the field
            detail = " ".join(str(e).split())[:160] or type(e).__name__
            raise ValueError(
                f"num_players: {self.env_id} cannot be reset for {self.num_players} player(s) ({detail})"
            ) from None
        return self


class TextArenaObservation(Message):
    """What a seat sees: TextArena's observation text for its player, as TextArena renders it."""

    env_id: str
    player_id: int = Field(ge=0)
    to_move: bool = Field(description="Whether this player is the one TextArena waits for.")
    observation: str = Field(description="TextArena's get_observation() text for this player.")
