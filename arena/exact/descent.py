"""Exploitability descent, full width (Lockhart et al., 2019, "Computing approximate equilibria in
sequential adversarial games by exploitability descent"), on any policy given as action probabilities.

For a two-player zero-sum game and a policy ``pi`` (both players'), player ``p``'s part of the
descent direction at one of its information states ``I`` comes from the game played against the
exact best response ``b(pi_p)`` of the other player (OpenSpiel's
``action_value_vs_best_response.Calculator``, which walks the whole tree)::

    q(I, a)  = the value to p of playing a at I, then pi_p, against b(pi_p)
    c(I)     = the counterfactual reach of I against b(pi_p): chance's and b's probabilities
               of the histories in I, summed (p's own are left out)
    v(I)     = sum_a pi(a | I) q(I, a)
    A(I, a)  = c(I) * pi(a | I) * (q(I, a) - v(I))

and ED's loss is ``L = - sum_I sum_a c(I) * pi(a | I) * sg(q(I, a) - v(I))`` (``sg``: no gradient),
as OpenSpiel's own ``exploitability_descent.LossCalculator`` computes it. Its gradient in any
parameters ``theta`` of a softmax policy is that of a policy-gradient loss over every (state,
action) pair with the advantages ``A``::

    grad L = - sum_I sum_a c(I) pi(a|I) (q - v) grad log pi(a|I) = - sum_(I,a) A(I, a) grad log pi(a|I)

(``grad pi = pi grad log pi``). So a language model takes one ED step as a batch of samples, one per
legal action of every information state, each the action's text chosen among the others
(``Sample.alternatives``, normalised as ``action_mode: score`` plays) with advantage ``A(I, a)``
(arena/loop/components/descent.py). Nothing is sampled: the step is deterministic given the weights.

``natural`` weighting (``train.descent.weighting``, not in Lockhart et al.) drops the ``pi(a | I)``
factor: ``N(I, a) = c(I) (q(I, a) - v(I))``, trained on as ``- sum N grad log pi``. ED's gradient vanishes
as the policy saturates (``pi (q - v)`` goes to 0 at a pure policy): in a tabular softmax started at a
near-pure policy (logits 6 and 0 at every state, exploitability 0.997), ED at step size 2 is still at
0.937 after 100 steps, while ``N`` at step size 0.5 is at 0.262 after 10 steps, first below 0.1 at step 17
and at 0.002 after 300 (tests/arena/test_exact_descent.py pins these). For a
two-action state the logits' gradient of ``sum_a N(a) log pi(a)`` moves their difference by
``c (q_2 - q_1) (1 + (pi_2 - pi_1)^2)``: the natural-gradient direction of softmax policies (Kakade,
2001; the advantage itself, as NeuRD updates logits, Hennes et al., 2020), scaled by a factor in [1, 2],
so it is a descent direction wherever ED's is, and does not vanish at a pure policy. For more actions it
is ``c [(q_b - v) - pi_b sum_a (q_a - v)]``, not exactly the natural gradient.

By Danskin's theorem ``-grad L`` is a descent direction of each player's exploitability term (the
best response is held fixed while its value is differentiated); ED converges in the last iterate
for tabular softmax policies on Kuhn and Leduc poker (Lockhart et al., figures 2-3). The
exploitability of ``pi`` comes for free: the best responder's values, averaged over the two players.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.core.game_types import ActionProbs, ActionQuery
from arena.exact.tree import ExactTree, count_info_states, fill, is_zero_sum


def descent_targets(tree: ExactTree, action_probs: ActionProbs, weighting: str = "policy", bound: float = 0.0
                    ) -> tuple[list[ActionQuery], list[list[float]], dict[str, float]]:
    """Every information state's query, the advantages of its legal actions (in the query's order) and
    ``{"exploitability": ...}`` of the policy ``action_probs`` gives (module docstring). ``weighting``:
    ``policy``, ED's ``A(I, a)``; ``natural``, ``N(I, a) = c(I) (q(I, a) - v(I))``. ``bound`` > 0: the
    advantages pass through :func:`bounded`. A ``ValueError`` line for a game that is not two-player
    zero-sum."""
    from open_spiel.python.algorithms.action_value_vs_best_response import Calculator

    game = check_game(tree)
    table, queries, ids = tree.info_states()
    probs = action_probs(queries)
    fill(table, ids, probs)
    advantages: list[list[float]] = [[] for _ in queries]
    calculator = Calculator(game)
    best = []
    key_of = {r: k for k, r in table.state_lookup.items()}  # row -> information-state string
    for player in range(2):
        rows = [r for r, s in enumerate(table.states) if s.current_player() == player]
        out = calculator(player, table, [key_of[r] for r in rows])
        best.append(float(out.exploitability))
        for j, r in enumerate(rows):
            advantages[r] = WEIGHTINGS[weighting](probs[r], [out.values_vs_br[j][a] for a in ids[r]],
                                                  float(out.counterfactual_reach_probs_vs_br[j]))
            if bound > 0:
                advantages[r] = bounded(probs[r], advantages[r], bound)
    return queries, advantages, {"exploitability": float(np.mean(best))}


def check_game(tree: ExactTree) -> Any:
    """The game, or a ``ValueError`` line: descent needs two players, zero-sum, and a tree small enough to walk."""
    game = tree.game
    if game.num_players() != 2 or not is_zero_sum(game):
        raise ValueError(f"exploitability descent needs a two-player zero-sum game; {game} has "
                         f"{game.num_players()} players{'' if is_zero_sum(game) else ' and is not zero-sum'}")
    count_info_states(game, tree.max_states)
    return game


def action_advantages(pi: Sequence[float], q: Sequence[float], reach: float) -> list[float]:
    """``A(a) = c * pi(a) * (q(a) - v)`` with ``v = sum_a pi(a) q(a)`` (module docstring); they sum to 0."""
    p, values = np.asarray(pi, dtype=float), np.asarray(q, dtype=float)
    v = float(p @ values)
    return [float(reach * pa * (qa - v)) for pa, qa in zip(p, values, strict=True)]


def natural_advantages(pi: Sequence[float], q: Sequence[float], reach: float) -> list[float]:
    """``N(a) = c * (q(a) - v)`` with ``v = sum_a pi(a) q(a)``: ED's ``A(a) / pi(a)`` (module docstring)."""
    p, values = np.asarray(pi, dtype=float), np.asarray(q, dtype=float)
    v = float(p @ values)
    return [float(reach * (qa - v)) for qa in values]


#: ``train.descent.weighting``'s choices: the advantage of each legal action at one information state.
WEIGHTINGS = {"policy": action_advantages, "natural": natural_advantages}


def bounded(pi: Sequence[float], advantages: Sequence[float], bound: float) -> list[float]:
    """``advantages`` with 0 where one would push its action further out of ``[bound, 1 - bound]``: a positive
    advantage of an action already at ``pi >= 1 - bound``, a negative one at ``pi <= bound`` (``train.descent.bound``;
    the logit threshold of NeuRD, Hennes et al., 2020, on probabilities). A policy-gradient step at a softmax
    pushes a probability in proportion to ``log pi`` without end; this stops it at the bound, so a state whose
    best action changes is not left ever deeper in the other one."""
    return [0.0 if (a > 0 and p >= 1 - bound) or (a < 0 and p <= bound) else float(a)
            for p, a in zip(pi, advantages, strict=True)]
