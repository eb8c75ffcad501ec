"""Shared CLI plumbing: configuration errors exit with code 2 and one line, no traceback; a run that
cannot go on (:class:`~arena.core.errors.RunStopped`: stale weights, a full disk) exits with code 1 the same way,
and so does a policy server that stops answering (``arena.policies.openai.ServerError``, after its retries) in
any command (eval, tournament, play); ``arena.train`` adds which checkpoint to resume from.

Several ranks on one machine (``arena.train --ranks N``, :func:`launch_ranks`) keep the rule: the ranks hand
their one line to the launcher, which prints the first of them once, in place of torchrun's report."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

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


#: Set by :func:`launch_ranks` for its ranks: the folder where each writes its one-line error, file ``<RANK>``.
RANK_ERRORS = "ARENA_RANK_ERRORS"


def fail(message: str, code: int) -> NoReturn:
    """Exit with ``code`` after the one line ``error: <message>`` (line breaks in a quoted value folded); a rank
    started by :func:`launch_ranks` hands the line to the launcher instead of printing it."""
    line = f"error: {' '.join(message.split())}"
    folder, rank = os.environ.get(RANK_ERRORS), os.environ.get("RANK")
    if folder and rank is not None and os.path.isdir(folder):
        with open(os.path.join(folder, rank), "w", encoding="utf-8") as f:
            f.write(f"{code}\n{line}\n")
    else:
        print(line, file=sys.stderr)
    sys.exit(code)


def run_cli(main: Callable[[], int | None]) -> None:
    show_arena_deprecations()
    try:
        code = main()
    except ConfigError as e:
        fail(str(e), 2)
    except RunStopped as e:
        fail(str(e), 1)
    except RuntimeError as e:
        from arena.policies.openai import ServerError  # light (httpx is imported by the policy, not the module)

        if not isinstance(e, ServerError):
            raise
        fail(str(e), 1)  # a quoted reply may hold line breaks
    sys.exit(code or 0)


def launch_ranks(module: str, ranks: int, argv: list[str]) -> int:
    """``torchrun --standalone --nproc-per-node RANKS -m MODULE ARGV``, run in this process, with torchrun's own
    report of a failed rank (its log lines and ``ChildFailedError``, some 40 lines after the ranks' own) replaced
    by one line: the one-line error of the lowest failed rank that wrote one (:func:`fail`), else which rank
    failed and how (its traceback is above, from the rank itself). Returns the exit code."""
    import logging
    import tempfile

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    logging.disable(logging.CRITICAL)  # torchrun's logs, in this process only (each rank is a fresh interpreter)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # what torchrun sets for several ranks, without its banner
    with tempfile.TemporaryDirectory(prefix="arena-ranks-") as folder:
        os.environ[RANK_ERRORS] = folder
        try:
            run(get_args_parser().parse_args(["--standalone", "--nproc-per-node", str(ranks), "-m", module, *argv]))
        except ChildFailedError as e:
            written = sorted((int(name), open(os.path.join(folder, name), encoding="utf-8").read().split("\n", 1))
                             for name in os.listdir(folder) if name.isdigit())
            if written:
                code, line = written[0][1]
                print(line.strip(), file=sys.stderr)
                return int(code)
            failures = sorted(e.failures.items(), key=lambda kv: (kv[1].exitcode <= 0, kv[0]))  # an exit before a kill
            rank, failure = failures[0]
            how = f"exited with code {failure.exitcode}" if failure.exitcode > 0 else f"was killed ({failure.signal_name()})"
            print(f"error: rank {rank} of {ranks} {how}; its output is above", file=sys.stderr)
            return failure.exitcode if failure.exitcode > 0 else 1
        finally:
            del os.environ[RANK_ERRORS]
            logging.disable(logging.NOTSET)
    return 0
