"""Shared CLI plumbing: configuration errors exit with code 2 and one line, no traceback; a run that
cannot go on (:class:`~arena.core.errors.RunStopped`: stale weights, a full disk) exits with code 1 the same way,
and so does a policy server that stops answering (``arena.policies.openai.ServerError``, after its retries) in
any command (eval, tournament, play); ``arena.train`` adds which checkpoint to resume from."""

from __future__ import annotations

import sys
from collections.abc import Callable

from arena.core.errors import ConfigError, RunStopped


def run_cli(main: Callable[[], int | None]) -> None:
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
