"""Shared CLI plumbing: configuration errors exit with code 2 and one line, no traceback; a run that
cannot go on (:class:`~arena.config.RunStopped`: stale weights, a full disk) exits with code 1 the same way."""

from __future__ import annotations

import sys
from collections.abc import Callable

from arena.config import ConfigError, RunStopped


def run_cli(main: Callable[[], int | None]) -> None:
    try:
        code = main()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except RunStopped as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code or 0)
