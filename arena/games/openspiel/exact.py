"""Exact exploitability of any policy given as action probabilities, through OpenSpiel's own code.

The policy at an information state ``I`` of player ``p`` is whatever the seat
``player_p`` is asked through :class:`~arena.core.game_types.ActionQuery`: the
prompt the seat sees at ``I`` (the env's own :func:`~arena.games.openspiel.env.observe`
and :func:`~arena.games.openspiel.env.render`) and the names of the legal actions.
The answers fill an ``open_spiel.python.policy.TabularPolicy``; then

    NashConv(pi) = sum_p [ max_{pi'_p} u_p(pi'_p, pi_-p) - u_p(pi) ]
    exploitability(pi) = NashConv(pi) / n_players

come from ``open_spiel.python.algorithms.exploitability`` (exact best
responses over the whole tree). Exploitability is reported for two-player
zero-sum games only (it is then the mean gain of a best responder); NashConv for
any game. Games with more information states than
``exploitability_max_states`` are refused with one line (the enumeration walks
the whole tree).

Reference points (the same code on OpenSpiel's own policies): the uniform
random policy (Kuhn: 0.4583) and the average policy of OpenSpiel's CFR+ solver
(C++ ``pyspiel.CFRPlusSolver``) after ``CFR_ITERATIONS`` iterations (Kuhn: below 1e-4).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from arena.core.game_types import ActionProbs, ActionQuery

CFR_ITERATIONS = 1000
#: History nodes walked per allowed information state before the size check gives up.
WALK_FACTOR = 50


class TooLarge(ValueError):
    """The game has too many information states to enumerate."""


def count_info_states(game: Any, limit: int) -> int:
    """Decision information states of ``game``, counted by a walk that stops past ``limit`` states
    (or ``WALK_FACTOR * limit`` histories): :class:`TooLarge` then, with one line."""
    seen: set[tuple[int, str]] = set()
    stack, walked = [game.new_initial_state()], 0
    key = _key_fn(game)
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


def _key_fn(game: Any) -> Any:
    if game.get_type().provides_information_state_string:
        return lambda s: s.information_state_string()
    return lambda s: s.observation_string()


def tabular_policy(config: Any, action_probs: ActionProbs) -> Any:
    """A ``TabularPolicy`` whose row at each information state is ``action_probs`` of that state's query."""
    from open_spiel.python import policy as os_policy

    from arena.games.openspiel.env import observe, render

    game = config.load()
    count_info_states(game, config.exploitability_max_states)
    table = os_policy.TabularPolicy(game)
    queries, rows, ids = [], [], []
    for row, state in enumerate(table.states):
        player = state.current_player()
        obs = observe(config.game, state, player)
        queries.append(ActionQuery(seat=f"player_{player}", messages=render(obs), observation=obs, actions=obs.legal))
        rows.append(row)
        ids.append(obs.legal_ids)
    answers = action_probs(queries)
    table.action_probability_array[:] = 0.0
    for row, legal, probs in zip(rows, ids, answers, strict=True):
        p = np.asarray(probs, dtype=float)
        if p.shape != (len(legal),) or not np.isfinite(p).all() or (p < 0).any() or abs(p.sum() - 1) > 1e-6:
            raise ValueError(f"action probabilities at {table.states[row]} must be {len(legal)} numbers summing to 1, "
                             f"got {probs!r}")
        table.action_probability_array[row, list(legal)] = p
    return table


def exploitability_of(game: Any, table: Any) -> dict[str, float]:
    """``nash_conv`` (any game) and ``exploitability`` (two-player zero-sum) from OpenSpiel."""
    from open_spiel.python.algorithms import exploitability

    from arena.games.openspiel.rules import is_zero_sum

    out = {"nash_conv": float(exploitability.nash_conv(game, table))}
    if game.num_players() == 2 and is_zero_sum(game):
        out["exploitability"] = float(exploitability.exploitability(game, table))
    return out


def policy_exploitability(config: Any, action_probs: ActionProbs) -> dict[str, float]:
    """Exact NashConv / exploitability of the seats' policies, with the reference points beside them."""
    game = config.load()
    values = exploitability_of(game, tabular_policy(config, action_probs))
    refs = reference_points(str(game), config.exploitability_max_states)
    return values | {f"{k}_{ref}": v for ref, vals in refs.items() for k, v in vals.items()}


@lru_cache(maxsize=8)
def cfr_policy(game_string: str, iterations: int = CFR_ITERATIONS) -> Any:
    """OpenSpiel's CFR+ average policy after ``iterations`` iterations, as a ``TabularPolicy`` (cached)."""
    import pyspiel
    from open_spiel.python import policy as os_policy

    game = pyspiel.load_game(game_string)
    solver = pyspiel.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    table = os_policy.TabularPolicy(game)
    for row, state in enumerate(table.states):
        for action, p in average.action_probabilities(state).items():
            table.action_probability_array[row, action] = p
    return table


@lru_cache(maxsize=8)
def reference_points(game_string: str, max_states: int) -> dict[str, dict[str, float]]:
    """Uniform random and CFR+ policies' values, by name."""
    import pyspiel
    from open_spiel.python import policy as os_policy

    game = pyspiel.load_game(game_string)
    count_info_states(game, max_states)
    return {"uniform": exploitability_of(game, os_policy.UniformRandomPolicy(game)),
            "cfr": exploitability_of(game, cfr_policy(game_string))}


# ------------------------------------------------------------------ exact head-to-head values
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


# ------------------------------------------------------------------ the average policy
def own_reach(game: Any, table: Any) -> np.ndarray:
    """``x[row]``: the probability that the player to act at ``table.states[row]`` takes its own actions on
    the way there (chance and the other players left out). One number per information state under perfect
    recall (every history of the state has the same own actions); 0 for a state the policy never reaches."""
    x = np.zeros(len(table.states))
    index, key = table.state_lookup, _key_fn(game)

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


def average_exploitability(config: Any, action_probs: Any, weights: Any = None) -> dict[str, float]:
    """Exact NashConv / exploitability of the average (:func:`average_policy`) of several policies, each
    given as an :data:`~arena.core.game_types.ActionProbs` (e.g. one per checkpoint)."""
    game = config.load()
    tables = [tabular_policy(config, probs) for probs in action_probs]
    return exploitability_of(game, average_policy(game, tables, weights))


# ------------------------------------------------------------------ exact best responses
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


@lru_cache(maxsize=16)
def best_response_to_bot(game_string: str, target: str, max_states: int) -> Any:
    """:func:`best_response_table` to the OpenSpiel bot ``target`` (arena/games/openspiel/bots.py), cached;
    :class:`TooLarge` (one line) for a game with more than ``max_states`` information states."""
    import pyspiel
    from open_spiel.python import policy as os_policy

    from arena.games.openspiel.bots import BOTS
    from arena.games.openspiel.env import observe

    game = pyspiel.load_game(game_string)
    count_info_states(game, max_states)
    name = game.get_type().short_name
    table = os_policy.TabularPolicy(game)
    for row, state in enumerate(table.states):
        obs = observe(name, state, state.current_player())
        table.action_probability_array[row] = 0.0
        table.action_probability_array[row, list(obs.legal_ids)] = BOTS[target].action_probs(obs)
    return best_response_table(game, table)
