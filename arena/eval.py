"""``python -m arena.eval``: held-out evaluation, implemented in :mod:`arena.rank.eval`."""

from arena.cli import run_cli
from arena.rank.eval import main

if __name__ == "__main__":
    run_cli(main)
