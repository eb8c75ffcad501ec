"""A sandboxed run's report, read by the parent (arena/games/skill_sp/sandbox.py): bounded nesting of
the values that cross the pipe (a call's arguments, the JSON value returned), and the driver's
report, accepted only when it carries the run's secret. Pure functions, no process.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any




MAX_DEPTH = 64  # nesting of a returned JSON value; deeper is refused before json.loads sees it
MAX_ARG_DEPTH = 4 * MAX_DEPTH  # nesting of a call's arguments (a contract and responses inside); deeper is refused


def value_depth(value: Any, limit: int) -> int:
    """Nesting of lists, tuples and dicts in ``value``, counted without recursion; stops past ``limit``
    (a cyclic value counts as deeper than any limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, (list, tuple)):
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((v, depth + 1) for v in item)
    return deepest


def json_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text, strings skipped (linear, no recursion)."""
    depth = deepest = 0
    for m in _JSON_TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def parse_report(data: bytes, secret: bytes) -> dict[str, Any] | str:
    """The driver's report, or why there is none: it must start with the secret and be one JSON object."""
    if not data:
        return "no report"
    head, sep, body = data.partition(b"\n")
    if not sep or not secrets.compare_digest(head, secret):
        return "the result channel carries something other than the driver's report"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the report is not UTF-8"
    if json_depth(text) > MAX_DEPTH:
        return f"the result is nested deeper than {MAX_DEPTH} levels"
    try:
        report = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"the report is not one JSON object: {str(exc)[:100]}"
    if not isinstance(report, dict) or not isinstance(report.get("ok"), bool):
        return "the report is not one JSON object"
    return report
