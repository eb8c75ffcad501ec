"""The exact layer's view of a game: its OpenSpiel tree and how each information state becomes the
prompt its seat sees there.

A game declares that it can be analysed exactly as OpenSpiel games declare their ``GameType``: it
implements :class:`ExactGame` (``exact_tree()``), returning an :class:`ExactTree`: the ``pyspiel``
game, the query of each information state (the seat's prompt and the legal action texts, with their
OpenSpiel ids), the largest number of information states it agrees to enumerate, whether the policy a
seat plays is the exact one (``action_mode: score``, or invalid replies retried) or the played one
(free generation: invalid replies fall back to a uniform legal move), and its reply parser. Everything
in :mod:`arena.exact` works on that, never on a game's own classes, and the loop and the rank CLIs
import this layer, never a game.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from arena.core.game_types import ActionProbs, ActionQuery

#: History nodes walked per allowed information state before the size check gives up.
WALK_FACTOR = 50


class TooLarge(ValueError):
    """The game has too many information states to enumerate."""


@dataclass(frozen=True)
class ExactTree:
    """A game as the exact solvers see it (module docstring)."""

    game: Any  # the pyspiel game
    #: (history, player) -> the query the player's seat is asked there, and the OpenSpiel ids of its actions
    query: Callable[[Any, int], tuple[ActionQuery, Sequence[int]]]
    max_states: int  # information states it agrees to enumerate (TooLarge past it)
    plays_exact: bool = False  # the seats play the exact policy (score mode; retried invalid replies)
    retry: bool = False  # invalid replies are retried: the played policy depends on the retry prompt
    parse: Callable[[str, Sequence[str]], Any] | None = None  # reply text -> action index (else: invalid)

    @property
    def zero_sum(self) -> bool:
        return is_zero_sum(self.game)

    def info_states(self) -> tuple[Any, list[ActionQuery], list[tuple[int, ...]]]:
        """An empty ``TabularPolicy`` of the game, and for each of its rows (information states) the query its
        seat is asked there and the OpenSpiel ids of the legal actions, in the query's order; :class:`TooLarge`
        past :attr:`max_states`."""
        from open_spiel.python import policy as os_policy

        count_info_states(self.game, self.max_states)
        table = os_policy.TabularPolicy(self.game)
        queries, ids = [], []
        for state in table.states:
            q, legal = self.query(state, state.current_player())
            queries.append(q)
            ids.append(tuple(legal))
        table.action_probability_array[:] = 0.0
        return table, queries, ids


@runtime_checkable
class ExactGame(Protocol):
    """The capability: a game whose information states can be enumerated and asked (an OpenSpiel game)."""

    def exact_tree(self) -> ExactTree: ...


def is_zero_sum(game: Any) -> bool:
    """The game's declared utility is zero-sum (OpenSpiel's ``GameType.utility``)."""
    import pyspiel

    return bool(game.get_type().utility == pyspiel.GameType.Utility.ZERO_SUM)


def count_info_states(game: Any, limit: int) -> int:
    """Decision information states of ``game``, counted by a walk that stops past ``limit`` states
    (or ``WALK_FACTOR * limit`` histories): :class:`TooLarge` then, with one line."""
    seen: set[tuple[int, str]] = set()
    stack, walked = [game.new_initial_state()], 0
    key = key_fn(game)
    while stack:
        state = stack.pop()
        walked += 1
        if len(seen) > limit or walked > WALK_FACTOR * limit:
            raise TooLarge(f"{game} has more than {limit} information states (or {WALK_FACTOR * limit} histories) "
                           "to enumerate; exact exploitability is for small games such as kuhn_poker and leduc_poker "
                           "(raise game.exploitability_max_states to try anyway)")
        if state.is_terminal():
            continue
        if not state.is_chance_node():
            seen.add((state.current_player(), key(state)))
        actions = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
        stack.extend(state.child(a) for a in actions)
    return len(seen)


def key_fn(game: Any) -> Any:
    if game.get_type().provides_information_state_string:
        return lambda s: s.information_state_string()
    return lambda s: s.observation_string()


def fill(table: Any, ids: Sequence[Sequence[int]], answers: Sequence[Sequence[float]]) -> Any:
    """``table`` with row ``r`` holding ``answers[r]`` at the legal ids ``ids[r]`` (0 elsewhere); a
    ``ValueError`` line for a row that is not a distribution over its legal actions."""
    for row, (legal, probs) in enumerate(zip(ids, answers, strict=True)):
        p = np.asarray(probs, dtype=float)
        if p.shape != (len(legal),) or not np.isfinite(p).all() or (p < 0).any() or abs(p.sum() - 1) > 1e-6:
            raise ValueError(f"action probabilities at {table.states[row]} must be {len(legal)} numbers summing to 1, "
                             f"got {list(probs)!r}")
        table.action_probability_array[row] = 0.0
        table.action_probability_array[row, list(legal)] = p
    return table


def tabular_policy(tree: ExactTree, action_probs: ActionProbs) -> Any:
    """A ``TabularPolicy`` whose row at each information state is ``action_probs`` of that state's query."""
    table, queries, ids = tree.info_states()
    return fill(table, ids, action_probs(queries))


def exploitability_of(game: Any, table: Any) -> dict[str, float]:
    """``nash_conv`` (any game) and ``exploitability`` (two-player zero-sum) from OpenSpiel."""
    from open_spiel.python.algorithms import exploitability

    out = {"nash_conv": float(exploitability.nash_conv(game, table))}
    if game.num_players() == 2 and is_zero_sum(game):
        out["exploitability"] = float(exploitability.exploitability(game, table))
    return out
