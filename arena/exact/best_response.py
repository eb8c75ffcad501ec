"""Exact best responses (OpenSpiel's ``BestResponsePolicy``): to a table, and to the policy the seats
answering an ``ActionProbs`` play."""

from __future__ import annotations

from typing import Any

from arena.core.game_types import ActionProbs
from arena.exact.played import played_table
from arena.exact.tree import ExactTree


def best_response_table(game: Any, policy: Any) -> Any:
    """A ``TabularPolicy`` that plays, at every information state of every player ``p``, OpenSpiel's exact
    best response of ``p`` to ``policy`` in the other seats (``best_response.BestResponsePolicy``: the
    action of highest value against ``policy``, given the opponents' reach; one-hot)."""
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms.best_response import BestResponsePolicy

    responders = [BestResponsePolicy(game, p, policy) for p in range(game.num_players())]
    table = os_policy.TabularPolicy(game)
    table.action_probability_array[:] = 0.0
    for row, state in enumerate(table.states):
        player = state.current_player()
        best = responders[player].best_response_action(state.information_state_string(player))
        table.action_probability_array[row, best] = 1.0
    return table


def best_response_to_policy(tree: ExactTree, action_probs: ActionProbs) -> Any:
    """:func:`best_response_table` to the policy the seats answering ``action_probs`` play
    (:func:`~arena.exact.played.played_table`): every information state is asked once (24 queries on Kuhn,
    1872 on Leduc); :class:`~arena.exact.tree.TooLarge` past the tree's ``max_states``."""
    return best_response_table(tree.game, played_table(tree, action_probs))
