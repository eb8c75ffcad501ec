"""``python -m arena.plot RUN_DIR``: a run's curves, implemented in :mod:`arena.loop.plot`."""

from arena.loop.plot import main

if __name__ == "__main__":
    raise SystemExit(main())
