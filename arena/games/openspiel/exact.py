"""Moved (#52): the exact solvers are :mod:`arena.exact` (split by concern, on a game's
:class:`~arena.exact.tree.ExactTree`). These names keep their old signatures, which take the game's
``OpenSpielConfig``, for a release (CHANGELOG.md)."""

from __future__ import annotations

from typing import Any

from arena.core.game_types import ActionQuery  # noqa: F401 - imported from here by older code
from arena.exact.average import average_policy, own_reach  # noqa: F401
from arena.exact.best_response import best_response_table  # noqa: F401
from arena.exact.played import expected_invalid_rate, fallback, played_policy, softmax  # noqa: F401
from arena.exact.references import CFR_ITERATIONS, cfr_policy, reference_points  # noqa: F401
from arena.exact.tree import WALK_FACTOR, TooLarge, count_info_states, exploitability_of, fill  # noqa: F401
from arena.exact.values import expected_results, expected_returns, head_to_head  # noqa: F401
from arena.games.openspiel.bots import best_response_to_bot  # noqa: F401
from arena.games.openspiel.tree import exact_tree


def info_state_queries(config: Any) -> Any:
    return exact_tree(config).info_states()


def tabular_policy(config: Any, action_probs: Any) -> Any:
    from arena.exact.tree import tabular_policy as on_tree

    return on_tree(exact_tree(config), action_probs)


def policy_tables(config: Any, action_probs: Any) -> Any:
    from arena.exact.played import policy_tables as on_tree

    return on_tree(exact_tree(config), action_probs)


def policy_exploitability(config: Any, action_probs: Any) -> Any:
    from arena.exact.played import policy_exploitability as on_tree

    return on_tree(exact_tree(config), action_probs)


def sampled_played_exploitability(config: Any, replies: Any, n: int, bootstrap: int = 200, seed: int = 0) -> Any:
    from arena.exact.played import sampled_played_exploitability as on_tree

    return on_tree(exact_tree(config), replies, n, bootstrap, seed)


def played_table(config: Any, action_probs: Any) -> Any:
    from arena.exact.played import played_table as on_tree

    return on_tree(exact_tree(config), action_probs)


def average_metrics(config: Any, played: Any) -> Any:
    from arena.exact.average import average_metrics as on_tree

    return on_tree(exact_tree(config), played)


def average_exploitability(config: Any, action_probs: Any, weights: Any = None) -> Any:
    from arena.exact.average import average_exploitability as on_tree

    return on_tree(exact_tree(config), action_probs, weights)


def best_response_to_policy(config: Any, action_probs: Any) -> Any:
    from arena.exact.best_response import best_response_to_policy as on_tree

    return on_tree(exact_tree(config), action_probs)
