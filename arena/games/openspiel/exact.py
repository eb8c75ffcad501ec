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

Which policy is measured. ``exploitability`` / ``nash_conv`` are of the policy given as
action probabilities: for a language model, its whole-reply likelihood of each legal
action text normalised over the legal texts (arena/loop/exact.py), i.e. the policy
GIVEN that the reply is a legal action text. In free generation a reply that names
no legal action is invalid and the env plays its fallback instead (OpenSpiel games: a
uniformly random legal action, ``OpenSpielGame.close_phase``). So where the action
probabilities come with the reply log-probabilities ``l_i`` behind them
(``action_probs.reply_logprobs``, arena/loop/exact.py ``SeatActionProbs``), the
policy actually played is reported too (:func:`played_policy`)::

    m(I) = sum_i exp(l_i)                                  mass on the exact legal replies
    p_played(a_i | I) = exp(l_i) + (1 - m(I)) * f_i(I)     f = the fallback, uniform 1/k

as ``exploitability_played`` / ``nash_conv_played``, with ``legal_mass_mean`` /
``legal_mass_min`` (``m`` over the information states) and ``invalid_rate_played``
(the expected per-game share of invalid moves when the seats play ``p_played``: what
the env's ``game/invalid_rate`` estimates by playing). This is exact under the
assumption that a reply parses as ``a_i`` only when it is exactly ``a_i``. The
parser (rules.parse_action) also accepts other spellings ("I bet", "BET"), so ``m``
is a lower bound on the mass on legal replies, ``invalid_rate_played`` an upper
bound on the invalid rate, and ``exploitability_played`` the exploitability of an
approximation of the played policy (no bound either way); where that matters it
must be estimated by sampling replies and parsing them. A policy given only as
probabilities (a bot; a plain ``ActionProbs``) puts all its mass on legal actions:
its played values equal the exact ones. Under ``invalid.mode: retry`` the played
policy depends on the retry prompt (which shows the failed reply), so the played
values are not reported (``legal_mass_*`` still are).

Reference points (the same code on OpenSpiel's own policies): the uniform
random policy (Kuhn: 0.4583) and the average policy of OpenSpiel's CFR+ solver
(C++ ``pyspiel.CFRPlusSolver``) after ``CFR_ITERATIONS`` iterations (Kuhn: below 1e-4).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def info_state_queries(config: Any) -> tuple[Any, list[ActionQuery], list[tuple[int, ...]]]:
    """An empty ``TabularPolicy`` of the game, and for each of its rows (information states) the query its
    seat is asked there and the OpenSpiel ids of the legal actions, in the query's order."""
    from open_spiel.python import policy as os_policy

    from arena.games.openspiel.env import observe, render

    game = config.load()
    count_info_states(game, config.exploitability_max_states)
    table = os_policy.TabularPolicy(game)
    queries, ids = [], []
    for state in table.states:
        player = state.current_player()
        obs = observe(config.game, state, player)
        queries.append(ActionQuery(seat=f"player_{player}", messages=render(obs), observation=obs, actions=obs.legal))
        ids.append(obs.legal_ids)
    table.action_probability_array[:] = 0.0
    return table, queries, ids


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


def tabular_policy(config: Any, action_probs: ActionProbs) -> Any:
    """A ``TabularPolicy`` whose row at each information state is ``action_probs`` of that state's query."""
    table, queries, ids = info_state_queries(config)
    return fill(table, ids, action_probs(queries))


def fallback(k: int) -> np.ndarray:
    """The env's move for an invalid reply among ``k`` legal actions: uniform, ``f_i = 1/k``
    (``OpenSpielGame.close_phase`` draws ``rng.integers(k)``)."""
    return np.full(k, 1.0 / k)


def played_policy(logps: Sequence[float]) -> tuple[np.ndarray, float]:
    """``(p_played, m)`` at one information state from the reply log-probabilities ``l_i`` of its legal
    action texts: ``m = sum_i exp(l_i)``, ``p_played_i = exp(l_i) + (1 - m) f_i`` with ``f`` the
    :func:`fallback`. A ``ValueError`` line when ``m`` exceeds 1 (the ``l_i`` are not probabilities of
    distinct replies)."""
    r = np.exp(np.asarray(logps, dtype=float))
    m = float(r.sum())
    if not np.isfinite(m) or m > 1 + 1e-6:
        raise ValueError(f"reply probabilities exp(l) must sum to at most 1, got {m!r} from l = {list(logps)!r}")
    return r + max(0.0, 1.0 - m) * fallback(len(r)), m


def softmax(logps: Sequence[float]) -> np.ndarray:
    """``exp(l_i - max l) / sum_j exp(l_j - max l)``: the action probabilities given a legal reply."""
    x = np.asarray(logps, dtype=float)
    e = np.exp(x - x.max())
    return e / e.sum()


def expected_invalid_rate(game: Any, played: Any, legal_mass: np.ndarray) -> float:
    """``E[invalid moves / moves]`` over whole games when every player follows the ``TabularPolicy``
    ``played`` (chance with its own probabilities), where at row ``r`` a move ``a`` was an invalid reply
    with probability ``(1 - m_r) f_a / p_played(a)`` (Bayes: the fallback's share of the move): the
    expectation of the env's per-game ``invalid_rate``. Exact: the whole tree is summed."""
    from open_spiel.python import policy as os_policy

    index, key = played.state_lookup, _key_fn(game)

    def walk(state: Any, reach: float, invalid: float, moves: int) -> float:
        if reach == 0.0:
            return 0.0
        if state.is_terminal():
            return reach * invalid / max(1, moves)
        if state.is_chance_node():
            return sum(walk(os_policy.child(state, a), reach * p, invalid, moves) for a, p in state.chance_outcomes())
        row = index[key(state)]
        legal = state.legal_actions()
        f = fallback(len(legal))
        total = 0.0
        for i, a in enumerate(legal):
            p = float(played.action_probability_array[row, a])
            share = (1.0 - legal_mass[row]) * f[i] / p if p > 0 else 0.0
            total += walk(state.child(a), reach * p, invalid + min(1.0, share), moves + 1)
        return total

    return float(walk(game.new_initial_state(), 1.0, 0.0, 0))


def policy_tables(config: Any, action_probs: ActionProbs) -> dict[str, Any]:
    """The exact policy's ``TabularPolicy`` (``"exact"``) and, when they can be told, the played policy's
    (``"played"``, :func:`played_policy` per row) and the legal mass per row (``"legal_mass"``)."""
    table, queries, ids = info_state_queries(config)
    reply = getattr(action_probs, "reply_logprobs", None)
    if reply is None:  # probabilities only: all the mass is on legal actions
        return {"exact": fill(table, ids, action_probs(queries)), "legal_mass": np.ones(len(ids))}
    logps = reply(queries)
    played_rows, mass = [], []
    for row, l in enumerate(logps):
        if len(l) != len(ids[row]):
            raise ValueError(f"reply log-probabilities at {table.states[row]} must be {len(ids[row])} numbers, "
                             f"got {list(l)!r}")
        p, m = played_policy(l)
        played_rows.append(p)
        mass.append(m)
    played = fill(table.__copy__(copy_action_probability_array=True), ids, played_rows)
    return {"exact": fill(table, ids, [softmax(l) for l in logps]), "played": played, "legal_mass": np.asarray(mass)}


def exploitability_of(game: Any, table: Any) -> dict[str, float]:
    """``nash_conv`` (any game) and ``exploitability`` (two-player zero-sum) from OpenSpiel."""
    from open_spiel.python.algorithms import exploitability

    from arena.games.openspiel.rules import is_zero_sum

    out = {"nash_conv": float(exploitability.nash_conv(game, table))}
    if game.num_players() == 2 and is_zero_sum(game):
        out["exploitability"] = float(exploitability.exploitability(game, table))
    return out


def policy_exploitability(config: Any, action_probs: ActionProbs) -> dict[str, float]:
    """Exact NashConv / exploitability of the seats' policies, the played policy's (module docstring:
    ``*_played``, ``legal_mass_mean`` / ``legal_mass_min``, ``invalid_rate_played``) and the reference
    points beside them."""
    game = config.load()
    tables = policy_tables(config, action_probs)
    values = exploitability_of(game, tables["exact"])
    mass = tables["legal_mass"]
    values |= {"legal_mass_mean": float(mass.mean()), "legal_mass_min": float(mass.min())}
    retry = getattr(getattr(config, "invalid", None), "mode", "na") == "retry"
    if getattr(config, "action_mode", None) == "score":  # the seat samples the exact policy: it is the one played
        values |= {f"{k}_played": v for k, v in exploitability_of(game, tables["exact"]).items()}
        values["invalid_rate_played"] = 0.0
    elif not retry:
        played = tables.get("played", tables["exact"])
        values |= {f"{k}_played": v for k, v in exploitability_of(game, played).items()}
        values["invalid_rate_played"] = expected_invalid_rate(game, played, mass)
    refs = reference_points(str(game), config.exploitability_max_states)
    return values | {f"{k}_{ref}": v for ref, vals in refs.items() for k, v in vals.items()}


# ------------------------------------------------------------------ the played policy, sampled
def sampled_played_exploitability(config: Any, replies: Any, n: int, bootstrap: int = 200,
                                  seed: int = 0) -> dict[str, float]:
    """A Monte Carlo estimate of the played policy's exploitability, for when replies other than the exact
    action texts parse as actions (module docstring). ``replies(queries, n)`` gives ``n`` replies per
    information state's query (arena/loop/exact.py ``SeatActionProbs.sample_replies``). Each is parsed with
    the env's own parser (``rules.parse_action``); with ``c_i`` replies naming ``a_i`` and ``c_0`` invalid::

        p_hat(a_i | I) = (c_i + c_0 f_i) / n                 f = the fallback, uniform 1/k

    ``exploitability_played_sampled`` is the exploitability of ``p_hat``; ``*_lo`` / ``*_hi`` the 2.5% and
    97.5% percentiles over ``bootstrap`` redraws of every state's counts from ``Multinomial(n, c / n)``
    (sampling noise only: the plug-in estimate of a maximum is biased upward by that noise, more so with
    small ``n``). ``invalid_share_sampled`` is the mean of ``c_0 / n`` over the information states (the
    sampled counterpart of ``1 - legal_mass_mean``)."""
    from arena.games.openspiel.rules import parse_action

    if n < 1 or bootstrap < 0:
        raise ValueError(f"n must be >= 1 and bootstrap >= 0 (got n={n}, bootstrap={bootstrap})")
    game = config.load()
    table, queries, ids = info_state_queries(config)
    texts = replies(queries, n)
    counts = []  # per row: (c_1 .. c_k, c_0)
    for q, row in zip(queries, texts, strict=True):
        c = np.zeros(len(q.actions) + 1)
        for text in row:
            parsed = parse_action(text, q.actions)
            c[parsed if isinstance(parsed, int) else -1] += 1
        counts.append(c)

    def value(rows: Sequence[np.ndarray]) -> float:
        probs = [(c[:-1] + c[-1] * fallback(len(c) - 1)) / c.sum() for c in rows]
        played = fill(table.__copy__(copy_action_probability_array=True), ids, probs)
        return exploitability_of(game, played).get("exploitability", float("nan"))

    rng = np.random.default_rng(seed)
    draws = [value([rng.multinomial(n, c / n).astype(float) for c in counts]) for _ in range(bootstrap)]
    point = value(counts)
    lo, hi = (np.percentile(draws, [2.5, 97.5]) if draws else (point, point))
    return {"exploitability_played_sampled": point, "exploitability_played_sampled_lo": float(lo),
            "exploitability_played_sampled_hi": float(hi),
            "invalid_share_sampled": float(np.mean([c[-1] / n for c in counts])), "replies_per_state": float(n)}


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


def average_metrics(config: Any, played: Sequence[Any]) -> dict[str, float]:
    """``nash_conv_average`` / ``exploitability_average``: of the :func:`average_policy` (equal weights) of
    the played policies ``played`` (each a ``TabularPolicy``'s ``action_probability_array``, as
    :func:`played_table` gives it), e.g. one per evaluation of a training run."""
    from open_spiel.python import policy as os_policy

    game = config.load()
    tables = []
    for rows in played:
        table = os_policy.TabularPolicy(game)
        table.action_probability_array = np.asarray(rows, dtype=float)
        tables.append(table)
    return {f"{k}_average": v for k, v in exploitability_of(game, average_policy(game, tables)).items()}


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


def played_table(config: Any, action_probs: ActionProbs) -> Any:
    """The ``TabularPolicy`` the seats answering ``action_probs`` actually play in this configuration: in
    ``action_mode: score`` the exact policy (each move is drawn from it); in free generation the played
    policy (:func:`played_policy`: the exact legal replies plus the invalid share on the fallback), or the
    exact policy where it cannot be told (probabilities only; ``invalid.mode: retry``)."""
    tables = policy_tables(config, action_probs)
    if config.action_mode == "score" or config.invalid.mode == "retry":
        return tables["exact"]
    return tables.get("played", tables["exact"])


def best_response_to_policy(config: Any, action_probs: ActionProbs) -> Any:
    """:func:`best_response_table` to the policy the seats answering ``action_probs`` play
    (:func:`played_table`): every information state is asked once (24 queries on Kuhn, 1872 on Leduc);
    :class:`TooLarge` past ``config.exploitability_max_states``."""
    return best_response_table(config.load(), played_table(config, action_probs))


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
