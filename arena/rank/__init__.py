"""Rate and compare policies by playing them: tournaments, held-out evaluation, paired comparisons and
pairwise judging. Built on the loop's assembly (arena.loop.build); the CLIs are ``python -m
arena.tournament`` and ``python -m arena.eval``."""
