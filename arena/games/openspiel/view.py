"""What a seat of an OpenSpiel game sees, and its prompt: pure functions of a history (the env renders each
turn through them, and the exact layer every information state)."""

from __future__ import annotations

from typing import Any

from arena.core.types import ChatMessage
from arena.games.openspiel import rules
from arena.games.openspiel.types import OpenSpielObservation


def observe(game_name: str, state: Any, player: int, style: str = "card_first") -> OpenSpielObservation:
    """What ``player`` sees in ``state`` (pure; exploitability renders every information state through it);
    ``style``: where a poker prompt puts the card, or OpenSpiel's own string (``OpenSpielConfig.view``)."""
    to_move = not state.is_terminal() and not state.is_chance_node() and state.current_player() == player
    card, view = rules.card_and_view(game_name, state, player, style)
    return OpenSpielObservation(
        game=str(state.get_game()), player=player, rules=rules.rules_text(game_name),
        view=view, card=card, style=style,
        info_state=rules.info_state(state, player) if not state.is_chance_node() else "",
        legal=tuple(rules.legal_names(state, player)) if to_move else (),
        legal_ids=tuple(state.legal_actions(player)) if to_move else (), to_move=to_move,
    )


def render(obs: OpenSpielObservation) -> list[ChatMessage]:
    """The chat prompt of one observation (pure): rules as system message, view and legal actions as user."""
    return [{"role": "system", "content": obs.rules},
            {"role": "user", "content": rules.prompt_text(obs.game, obs.player, obs.view, obs.legal, obs.card, obs.style)}]
