"""Errors every layer raises, and the one-line form of a validation error.

A :class:`ConfigError` (exit code 2) or :class:`RunStopped` (exit code 1) is
printed by the CLIs as one line, no traceback (arena/cli.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from pydantic import ValidationError


class ConfigError(ValueError):
    """A bad configuration; ``str(err)`` is one line for the user."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors (an unknown flag, a string where a number belongs) are one line,
    ``error: ...``, and exit code 2, like every other configuration error; ``--help`` is unchanged."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {' '.join(message.split())} (see --help)", file=sys.stderr)
        sys.exit(2)


class RunStopped(RuntimeError):
    """A run that cannot go on (stale generator weights, a full disk); ``str(err)`` is one line.
    The CLIs print it and exit with code 1, no traceback."""


def format_validation_error(err: ValidationError, prefix: str = "") -> str:
    """One line: ``field: problem (got value)`` for each error, joined by '; '."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        if e["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown key (remove it or check the spelling)")
            continue
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        if e["type"] == "unknown_rule" and isinstance(got, dict):  # name the key, not the whole section
            loc, got = f"{loc}.rule", got.get("rule")
        if isinstance(got, dict) or "input" not in e:  # a model-level check: its message names the fields
            parts.append(f"{loc}: {msg}")
        else:
            parts.append(f"{loc}: {msg} (got {got!r})")
    return "; ".join(parts)


def check_range(flag: str, value: int | None, low: int, high: int | None = None, above: str = "") -> None:
    """An integer flag within ``[low, high]`` (``high`` None: no upper bound); else a one-line ConfigError
    naming the flag, the value and the valid range, followed by ``above`` (what to do instead) when the
    value is over ``high``."""
    if value is None or (value >= low and (high is None or value <= high)):
        return
    valid = f">= {low}" if high is None else f"between {low} and {high}"
    raise ConfigError(f"{flag}: must be {valid} (got {value})" + (f"; {above}" if above and value >= low else ""))


def check_output_file(flag: str, path: str | os.PathLike[str] | None, made: bool = False) -> None:
    """A file a CLI will write at the end (``--json out.json``): checked at start-up, so a run does not
    fail after its work. A one-line ConfigError when ``path`` is a directory, a device, FIFO or socket
    (``/dev/full`` fails every write; a FIFO blocks until someone reads it) or its folder is missing
    (``made``: the CLI creates missing folders; then only a file in the way of one is refused)."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{flag}: {str(target)!r} is a directory; give a file name")
    if target.exists() and not target.is_file():
        raise ConfigError(f"{flag}: {str(target)!r} is not a regular file (a device, FIFO or socket); give a file name")
    if made:
        blocked = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            raise ConfigError(f"{flag}: {str(target)!r}: {str(blocked)!r} is a file, not a folder; give another path")
        return
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag}: {str(target)!r}: the folder {str(parent)!r} does not exist; create it or give another path")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag}: {str(target)!r}: the folder {str(parent)!r} is not writable")
