"""Shared CLI plumbing: configuration errors exit with code 2 and one line, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable

from arena.config import ConfigError


def run_cli(main: Callable[[], int | None]) -> None:
    try:
        code = main()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)
