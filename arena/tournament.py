"""``python -m arena.tournament``: rated matches between policies, implemented in :mod:`arena.rank.tournament`."""

from arena.cli import run_cli
from arena.rank.tournament import main

if __name__ == "__main__":
    run_cli(main)
