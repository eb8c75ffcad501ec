"""An OpenSpiel game as the exact layer walks it (:class:`arena.exact.tree.ExactTree`): the configured
game, each information state's query through the env's own :func:`~arena.games.openspiel.view.observe`
and :func:`~arena.games.openspiel.view.render`, and the env's parser and fallback."""

from __future__ import annotations

from typing import Any

from arena.core.game_types import ActionQuery
from arena.exact.tree import ExactTree
from arena.games.openspiel import rules
from arena.games.openspiel.types import OpenSpielConfig
from arena.games.openspiel.view import observe, render


def exact_tree(config: OpenSpielConfig) -> ExactTree:
    """The tree of ``config``'s game: ``exploitability_max_states`` bounds the enumeration; in
    ``action_mode: score`` a seat plays the exact policy, in free generation an invalid reply falls back to a
    uniformly random legal move (``OpenSpielGame.close_phase``), unless invalid replies are retried."""

    def query(state: Any, player: int) -> tuple[ActionQuery, tuple[int, ...]]:
        obs = observe(config.game, state, player, config.view)
        return ActionQuery(seat=f"player_{player}", messages=render(obs), observation=obs, actions=obs.legal), obs.legal_ids

    return ExactTree(game=config.load(), query=query, max_states=config.exploitability_max_states,
                     plays_exact=config.action_mode == "score", retry=config.invalid.mode == "retry",
                     parse=rules.parse_action)
