"""The average policy, as fictitious play averages it, and its exploitability: what NFSP and fictitious
play converge in while their iterates cycle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.exact.tree import ExactTree, exploitability_of, key_fn, tabular_policy


def own_reach(game: Any, table: Any) -> np.ndarray:
    """``x[row]``: the probability that the player to act at ``table.states[row]`` takes its own actions on
    the way there (chance and the other players left out). One number per information state under perfect
    recall (every history of the state has the same own actions); 0 for a state the policy never reaches."""
    x = np.zeros(len(table.states))
    index, key = table.state_lookup, key_fn(game)

    def walk(state: Any, reach: tuple[float, ...]) -> None:
        if state.is_terminal():
            return
        if state.is_chance_node():
            for a, _ in state.chance_outcomes():
                walk(state.child(a), reach)
            return
        p = state.current_player()
        row = index[key(state)]
        x[row] = reach[p]
        probs = table.action_probability_array[row]
        for a in state.legal_actions():
            walk(state.child(a), reach[:p] + (reach[p] * float(probs[a]),) + reach[p + 1:])

    walk(game.new_initial_state(), (1.0,) * game.num_players())
    return x


def average_policy(game: Any, tables: Any, weights: Any = None) -> Any:
    """The average of policies ``tables`` (``TabularPolicy`` each) as fictitious play averages them.

    With weights ``w_k`` (default ``1/K``; normalised to sum 1), at each information state ``I`` of player
    ``p``::

        avg(a | I) = sum_k w_k x_k(I) pi_k(a | I) / sum_k w_k x_k(I)

    where ``x_k(I)`` is player ``p``'s own reach probability of ``I`` under ``pi_k`` (:func:`own_reach`).
    This is the behaviour policy equivalent to drawing ``k`` with probability ``w_k`` once, before the
    game, and playing ``pi_k`` throughout (Heinrich et al. 2015, XFP; Kuhn's theorem): against any fixed
    opponents its expected return is ``sum_k w_k`` times ``pi_k``'s. Where no policy reaches ``I``
    (``sum_k w_k x_k(I) = 0``) the row is the plain weighted mean ``sum_k w_k pi_k(a | I)`` (never
    played, so no value depends on it)."""
    from open_spiel.python import policy as os_policy

    w = np.full(len(tables), 1.0 / len(tables)) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (len(tables),) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be {len(tables)} non-negative numbers, not all 0 (got {weights!r})")
    w = w / w.sum()
    reach = np.stack([own_reach(game, t) for t in tables])  # (K, states)
    probs = np.stack([t.action_probability_array for t in tables])  # (K, states, actions)
    mass = np.einsum("k,ks->s", w, reach)
    weighted = np.einsum("k,ks,ksa->sa", w, reach, probs)
    plain = np.einsum("k,ksa->sa", w, probs)
    out = os_policy.TabularPolicy(game)
    out.action_probability_array = np.where(mass[:, None] > 0, weighted / np.maximum(mass, 1e-300)[:, None], plain)
    return out


def average_metrics(tree: ExactTree, played: Sequence[Any]) -> dict[str, float]:
    """``nash_conv_average`` / ``exploitability_average``: of the :func:`average_policy` (equal weights) of
    the played policies ``played`` (each a ``TabularPolicy``'s ``action_probability_array``, as
    :func:`played_table` gives it), e.g. one per evaluation of a training run."""
    from open_spiel.python import policy as os_policy

    game = tree.game
    tables = []
    for rows in played:
        table = os_policy.TabularPolicy(game)
        table.action_probability_array = np.asarray(rows, dtype=float)
        tables.append(table)
    return {f"{k}_average": v for k, v in exploitability_of(game, average_policy(game, tables)).items()}


def average_exploitability(tree: ExactTree, action_probs: Any, weights: Any = None) -> dict[str, float]:
    """Exact NashConv / exploitability of the average (:func:`average_policy`) of several policies, each
    given as an :data:`~arena.core.game_types.ActionProbs` (e.g. one per checkpoint)."""
    game = tree.game
    tables = [tabular_policy(tree, probs) for probs in action_probs]
    return exploitability_of(game, average_policy(game, tables, weights))
