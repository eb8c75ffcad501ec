"""Moved (#52): exploitability descent's advantages are :mod:`arena.exact.descent`, on a game's
:class:`~arena.exact.tree.ExactTree`. These names keep their old signatures, which take the game's
``OpenSpielConfig``, for a release (CHANGELOG.md)."""

from __future__ import annotations

from typing import Any

from arena.exact.descent import WEIGHTINGS, action_advantages, bounded, natural_advantages  # noqa: F401
from arena.games.openspiel.tree import exact_tree


def descent_targets(config: Any, action_probs: Any, weighting: str = "policy", bound: float = 0.0) -> Any:
    from arena.exact.descent import descent_targets as on_tree

    return on_tree(exact_tree(config), action_probs, weighting, bound)


def check_game(config: Any) -> Any:
    from arena.exact.descent import check_game as on_tree

    return on_tree(exact_tree(config))
