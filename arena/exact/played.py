"""The policy a seat plays, and its exact exploitability, through OpenSpiel's own code.

Exact exploitability of any policy given as action probabilities, through OpenSpiel's own code.

The policy at an information state ``I`` of player ``p`` is whatever the seat
``player_p`` is asked through :class:`~arena.core.game_types.ActionQuery`: the
prompt the seat sees at ``I`` (the game's :attr:`~arena.exact.tree.ExactTree.query`)
and the names of the legal actions.
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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.core.game_types import ActionProbs
from arena.exact.references import reference_points
from arena.exact.tree import ExactTree, exploitability_of, fill, key_fn  # noqa: F401 - exploitability_of re-exported


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

    index, key = played.state_lookup, key_fn(game)

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


def policy_tables(tree: ExactTree, action_probs: ActionProbs) -> dict[str, Any]:
    """The exact policy's ``TabularPolicy`` (``"exact"``) and, when they can be told, the played policy's
    (``"played"``, :func:`played_policy` per row) and the legal mass per row (``"legal_mass"``)."""
    table, queries, ids = tree.info_states()
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


def policy_exploitability(tree: ExactTree, action_probs: ActionProbs) -> dict[str, float]:
    """Exact NashConv / exploitability of the seats' policies, the played policy's (module docstring:
    ``*_played``, ``legal_mass_mean`` / ``legal_mass_min``, ``invalid_rate_played``) and the reference
    points beside them."""
    game = tree.game
    tables = policy_tables(tree, action_probs)
    values = exploitability_of(game, tables["exact"])
    mass = tables["legal_mass"]
    values |= {"legal_mass_mean": float(mass.mean()), "legal_mass_min": float(mass.min())}
    if tree.plays_exact:  # the seat samples the exact policy (score mode): it is the one played
        values |= {f"{k}_played": v for k, v in exploitability_of(game, tables["exact"]).items()}
        values["invalid_rate_played"] = 0.0
    elif not tree.retry:
        played = tables.get("played", tables["exact"])
        values |= {f"{k}_played": v for k, v in exploitability_of(game, played).items()}
        values["invalid_rate_played"] = expected_invalid_rate(game, played, mass)
    refs = reference_points(str(game), tree.max_states)
    return values | {f"{k}_{ref}": v for ref, vals in refs.items() for k, v in vals.items()}


# ------------------------------------------------------------------ the played policy, sampled
def sampled_played_exploitability(tree: ExactTree, replies: Any, n: int, bootstrap: int = 200,
                                  seed: int = 0) -> dict[str, float]:
    """A Monte Carlo estimate of the played policy's exploitability, for when replies other than the exact
    action texts parse as actions (module docstring). ``replies(queries, n)`` gives ``n`` replies per
    information state's query (arena/loop/exact.py ``SeatActionProbs.sample_replies``). Each is parsed with
    the game's own parser (:attr:`ExactTree.parse`); with ``c_i`` replies naming ``a_i`` and ``c_0`` invalid::

        p_hat(a_i | I) = (c_i + c_0 f_i) / n                 f = the fallback, uniform 1/k

    ``exploitability_played_sampled`` is the exploitability of ``p_hat``; ``*_lo`` / ``*_hi`` the 2.5% and
    97.5% percentiles over ``bootstrap`` redraws of every state's counts from ``Multinomial(n, c / n)``
    (sampling noise only: the plug-in estimate of a maximum is biased upward by that noise, more so with
    small ``n``). ``invalid_share_sampled`` is the mean of ``c_0 / n`` over the information states (the
    sampled counterpart of ``1 - legal_mass_mean``)."""
    if n < 1 or bootstrap < 0:
        raise ValueError(f"n must be >= 1 and bootstrap >= 0 (got n={n}, bootstrap={bootstrap})")
    if tree.parse is None:
        raise ValueError("this game gives no reply parser: its played policy cannot be sampled")
    game, parse_action = tree.game, tree.parse
    table, queries, ids = tree.info_states()
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




def played_table(tree: ExactTree, action_probs: ActionProbs) -> Any:
    """The ``TabularPolicy`` the seats answering ``action_probs`` actually play in this configuration: in
    ``action_mode: score`` the exact policy (each move is drawn from it); in free generation the played
    policy (:func:`played_policy`: the exact legal replies plus the invalid share on the fallback), or the
    exact policy where it cannot be told (probabilities only; ``invalid.mode: retry``)."""
    tables = policy_tables(tree, action_probs)
    if tree.plays_exact or tree.retry:
        return tables["exact"]
    return tables.get("played", tables["exact"])
