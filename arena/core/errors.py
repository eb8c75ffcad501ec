"""Errors every layer raises, and the one-line form of a validation error.

A :class:`ConfigError` (exit code 2) or :class:`RunStopped` (exit code 1) is
printed by the CLIs as one line, no traceback (arena/cli.py).
"""

from __future__ import annotations

import argparse
import sys
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
