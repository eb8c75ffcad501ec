"""Exact head-to-head values of policies: expected returns and pairwise results summed over the whole
tree (OpenSpiel's ``expected_game_score``), so a table of them has no sampling noise."""

from __future__ import annotations

from typing import Any

import numpy as np


def expected_returns(game: Any, policies: Any) -> list[float]:
    """Each player's expected return when player ``p`` follows ``policies[p]`` (OpenSpiel ``Policy``
    objects, e.g. the ``TabularPolicy`` of :func:`tabular_policy`): OpenSpiel's
    ``expected_game_score.policy_value``, the sum over every history of its reach probability (chance
    and both players) times its returns. Exact: no game is sampled."""
    from open_spiel.python.algorithms import expected_game_score

    return [float(v) for v in expected_game_score.policy_value(game.new_initial_state(), list(policies))]


def expected_results(game: Any, policies: Any) -> np.ndarray:
    """``R[p, q]``: player ``p``'s expected pairwise result against player ``q`` (1 when ``p``'s return is
    higher, 0.5 when equal, 0 when lower; what a sampled tournament scores per game), summed over the
    tree exactly as ``policy_value`` sums returns."""
    from open_spiel.python import policy as os_policy

    def walk(state: Any) -> np.ndarray:
        if state.is_terminal():
            r = np.asarray(state.returns(), dtype=float)
            return (r[:, None] > r[None, :]) + 0.5 * (r[:, None] == r[None, :])
        if state.is_chance_node():
            moves = state.chance_outcomes()
        else:
            moves = policies[state.current_player()].action_probabilities(state).items()
        return sum(p * walk(os_policy.child(state, a)) for a, p in moves if p > 0)

    return np.asarray(walk(game.new_initial_state()), dtype=float)


def head_to_head(game: Any, tables: Any) -> tuple[np.ndarray, np.ndarray]:
    """Exact payoff matrices of the policies ``tables`` (one OpenSpiel policy each, defined at every
    player's states): ``returns[i, j]`` and ``results[i, j]`` are policy ``i``'s expected return and its
    expected pairwise result (:func:`expected_results`) in the seat it holds, averaged over the
    ``n_players`` seats it can hold with policy ``j`` in every other seat. ``results[i, i]`` is NaN (a
    policy does not play itself in a tournament); ``returns[i, i]`` is its mean seat value in self-play."""
    n, k = game.num_players(), len(tables)
    returns, results = np.zeros((k, k)), np.full((k, k), np.nan)
    for i in range(k):
        for j in range(k):
            ret, res = 0.0, 0.0
            for seat in range(n):
                profile = [tables[j]] * n
                profile[seat] = tables[i]
                ret += expected_returns(game, profile)[seat]
                if i != j:
                    r = expected_results(game, profile)
                    res += float(np.mean([r[seat, q] for q in range(n) if q != seat]))
            returns[i, j] = ret / n
            if i != j:
                results[i, j] = res / n
    return returns, results
