"""Reference policies of a game, by OpenSpiel's own solvers: the uniform random policy (Kuhn: 0.4583)
and the average policy of OpenSpiel's CFR+ solver (C++ ``pyspiel.CFRPlusSolver``) after
``CFR_ITERATIONS`` iterations (Kuhn: below 1e-4), and their exploitability beside a measured policy's."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from arena.exact.tree import count_info_states, exploitability_of

CFR_ITERATIONS = 1000


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
