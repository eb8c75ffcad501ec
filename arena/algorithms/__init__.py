"""Tabular game-solving algorithms, apart from the games (as OpenSpiel keeps ``algorithms/`` apart from
``games/``): references the learner's mechanisms are checked against. NumPy only; imports nothing of arena."""
