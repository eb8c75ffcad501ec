"""The rank CLIs' flag checks that need more than a range (:func:`arena.core.errors.check_range`): each
is a one-line :class:`~arena.core.errors.ConfigError` at start-up, before the config loads."""

from __future__ import annotations

import argparse
from pathlib import Path

from arena.core.errors import ConfigError, check_output_file, check_range

#: The most games one tournament schedules (each is a held-out seed and a result kept in its JSON), and the
#: most bootstrap resamples of its ratings (each refits Bradley-Terry to all the games).
MAX_GAMES = 100_000
MAX_BOOTSTRAP = 10_000


def check_image_file(flag: str, path: Path | None) -> None:
    """An image a CLI will write at the end: a file (not a folder or device) whose folder exists, with a
    suffix matplotlib writes (it appends ``.png`` to a name without one, and refuses an unknown one only
    when it saves, after the work)."""
    if path is None:
        return
    check_output_file(flag, path)
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in kinds:
        raise ConfigError(f"{flag}: {str(path)!r} does not end in an image type matplotlib writes "
                          f"({', '.join('.' + k for k in sorted(kinds))}); give e.g. payoff.png")


def check_tournament_flags(args: argparse.Namespace) -> None:
    """``arena.tournament``'s flags: ranges, output paths, and with ``--exact`` the flags of played games
    refused (no game is played, so they would be ignored). Fills in ``--bootstrap``'s default (1000)."""
    check_range("--games", args.games, 1, MAX_GAMES, "split the tournament by --seed")
    check_range("--bootstrap", args.bootstrap, 0, MAX_BOOTSTRAP, "a 95% interval settles by a few thousand")
    check_range("--seed", args.seed, 0)
    check_output_file("--json", args.json, made=True)  # its folder is created
    check_image_file("--png", args.png)
    if args.exact:
        for flag, value in (("--games", args.games), ("--layouts", args.layouts), ("--bootstrap", args.bootstrap)):
            if value is not None:
                raise ConfigError(f"{flag}: --exact plays no games, so {flag} does not apply; remove it, or drop "
                                  "--exact to play the games")
    args.bootstrap = 1000 if args.bootstrap is None else args.bootstrap
