"""Exact analysis of games small enough to enumerate, apart from any game (as OpenSpiel keeps its
``algorithms/`` apart from its games).

A game declares the capability by implementing :class:`~arena.exact.tree.ExactGame` (``exact_tree()``),
as OpenSpiel games declare a ``GameType``; the modules here work on the :class:`~arena.exact.tree.ExactTree`
it returns, split by concern:

* :mod:`arena.exact.tree`: enumeration of information states and their queries, tabular policies;
* :mod:`arena.exact.played`: the policy a seat plays (exact or with invalid replies on the fallback) and
  its exploitability, exact or sampled;
* :mod:`arena.exact.best_response`: exact best responses;
* :mod:`arena.exact.average`: the average policy (fictitious play's), and its exploitability;
* :mod:`arena.exact.values`: exact head-to-head values;
* :mod:`arena.exact.references`: the uniform and CFR+ reference policies;
* :mod:`arena.exact.descent`: exploitability descent's advantages (Lockhart et al., 2019).

The loop and the rank CLIs import this layer, never a game (an import-linter contract holds it).
"""

from arena.exact.tree import ExactGame, ExactTree, TooLarge

__all__ = ["ExactGame", "ExactTree", "TooLarge"]
