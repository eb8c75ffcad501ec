"""Shared CLI plumbing: configuration errors exit with code 2 and one line, no traceback; a run that
cannot go on (:class:`~arena.core.errors.RunStopped`: stale weights, a full disk) exits with code 1 the same way,
and so does a policy server that stops answering (``arena.policies.openai.ServerError``, after its retries) in
any command (eval, tournament, play); ``arena.train`` adds which checkpoint to resume from."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any

from arena.core.errors import ConfigError, RunStopped


def show_arena_deprecations() -> None:
    """Show arena's deprecation warnings (an old import path in a game's module) once each. Python shows a
    DeprecationWarning only when it is attributed to ``__main__``, and a game imported by a CLI never is.
    A user's own ``-W`` or ``PYTHONWARNINGS`` wins."""
    if not sys.warnoptions:
        warnings.filterwarnings("default", category=DeprecationWarning, message=r"(?s).*\barena\b")


def load_cli_config(given: str, overrides: list[str]) -> Any:
    """The config a CLI's CONFIG argument names: a YAML file, a game's own YAML by name (``spy``), or a game with
    no YAML of its own (one an installed package registers under the ``arena.games`` entry points, or a
    ``module:Class``), played with the defaults (``game: {name: <it>}``; ``--set`` adds to them). A name that is
    none of these is one line that says how to register a game."""
    from pathlib import Path

    from arena.core.registry import UnknownName, game_class, registered_games
    from arena.loop.config import apply_overrides, default_config_path, load_config, parse_config

    if Path(given).exists() or default_config_path(given) is not None or given.endswith((".yaml", ".yml")):
        return load_config(given, overrides)
    try:
        cls = game_class(given)
    except UnknownName:
        if "/" in given:
            return load_config(given, overrides)  # a path: "no such config file"
        known = ", ".join(sorted(registered_games()))
        raise ConfigError(
            f"{given}: no such config file, and no game registered under that name (registered: {known}); give a "
            "YAML file, a module:Class, or register the game from its package's pyproject.toml: "
            f'[project.entry-points."arena.games"] {given} = "your_package.module:YourGame", then pip install it'
        ) from None
    print(f"{given}: {cls.__module__}:{cls.__name__} has no YAML of its own; using the defaults "
          f"(game: {{name: {given}}}, the built-in model in every seat; add keys with --set)", file=sys.stderr)
    return parse_config(apply_overrides({"game": {"name": given}}, overrides), given)


def run_cli(main: Callable[[], int | None]) -> None:
    show_arena_deprecations()
    try:
        code = main()
    except ConfigError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)  # one line, whatever a message quotes
        sys.exit(2)
    except RunStopped as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(1)
    except RuntimeError as e:
        from arena.policies.openai import ServerError  # light (httpx is imported by the policy, not the module)

        if not isinstance(e, ServerError):
            raise
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)  # a quoted reply may hold line breaks
        sys.exit(1)
    sys.exit(code or 0)
