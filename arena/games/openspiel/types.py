"""Typed settings and observations of the OpenSpiel adapter (spec: ``arena/games/openspiel/__init__.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from arena.core.game import GameConfig
from arena.core.messages import Message

Param = bool | int | float | str


class OpenSpielConfig(GameConfig):
    """Which OpenSpiel game, with which parameters."""

    game: str = Field(default="kuhn_poker", description="OpenSpiel short name (pyspiel.registered_names()), e.g. "
                      "kuhn_poker, leduc_poker, tic_tac_toe, liars_dice.")
    params: dict[str, Param] = Field(default_factory=dict, description="OpenSpiel game parameters, e.g. "
                                     "{players: 3} for kuhn_poker or {numdice: 2} for liars_dice.")
    action_mode: Literal["generate", "score"] = Field(
        default="generate", description="How a model seat picks its move. generate: it writes a reply, parsed by the "
        "action grammar (an invalid reply plays the fallback). score: one legal action is drawn with the model's "
        "probability of its name as the whole reply, normalised over the legal actions (the policy the exact "
        "exploitability scores; backend hf), and that name is the completion it trains on.")
    view: Literal["card_first", "card_last", "card_in_question", "openspiel"] = Field(
        default="card_first", description="How the prompt shows a poker seat its private card (Kuhn and Leduc poker, "
        "rendered in words; bench/kuhn_card_kernel.py measures how much each makes the model's decision depend on "
        "it): card_first, 'Your card: King.' before the betting; card_last, as the prompt's last line; "
        "card_in_question, in the question itself ('You hold the King. Reply with ...'); openspiel, OpenSpiel's own "
        "information-state string ('[Private: 4]...', the card as a number), as every other game is shown.")
    exploitability_max_states: int = Field(
        default=20_000, ge=1, description="Largest number of information states exploitability will enumerate "
        "(Kuhn has 12, Leduc 936); bigger games are refused with a one-line error.")

    @field_validator("game")
    @classmethod
    def _known_game(cls, name: str) -> str:
        from arena.games.openspiel.rules import load_game

        load_game(name)  # GameLoadError is a ValueError: pydantic reports it as game.game
        return name

    @model_validator(mode="after")
    def _loads(self) -> OpenSpielConfig:
        from arena.games.openspiel.rules import load_game

        load_game(self.game, self.params)
        if self.view in ("card_last", "card_in_question") and self.game not in ("kuhn_poker", "leduc_poker"):
            raise ValueError(f"view: {self.view} places a poker card (kuhn_poker, leduc_poker); {self.game} renders "
                             "OpenSpiel's own information state: use card_first or openspiel")
        return self

    def load(self) -> Any:
        """The ``pyspiel.Game`` (cached)."""
        from arena.games.openspiel.rules import load_game

        return load_game(self.game, self.params)


class OpenSpielObservation(Message):
    """What one seat sees at its turn: the rules, its information state, its legal actions by name."""

    game: str = Field(description="OpenSpiel game string, e.g. 'kuhn_poker()' (bots key their solvers by it).")
    player: int = Field(ge=0, description="This seat's OpenSpiel player id.")
    rules: str = ""
    view: str = Field(default="", description="The information state as text (arena/games/openspiel/rules.py describe).")
    info_state: str = Field(default="", description="OpenSpiel's information-state string, verbatim.")
    card: str = Field(default="", description="Kuhn poker: the seat's card by name ('' in other games).")
    style: str = Field(default="card_first", description="Where the prompt puts the card (OpenSpielConfig.view).")
    legal: tuple[str, ...] = Field(default=(), description="Legal actions by name (action_to_string), in order.")
    legal_ids: tuple[int, ...] = Field(default=(), description="The same actions as OpenSpiel action ids.")
    to_move: bool = Field(default=False, description="True when this seat is the one to move.")
