"""The rules toolbox: pure helpers that almost every game's parser and rewards need.

Parsers never raise: they return the value or :class:`~arena.core.game.Invalid` with
a reason a person can read (it lands in the turn record and, in retry mode, in
the seat's next prompt). Reward helpers are plain arithmetic on dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from arena.core.game import Invalid

_INTEGER = re.compile(r"(?<![\d.])[+-]?\d{1,9}(?![\d.])")


_BOXED = re.compile(r"\\boxed\{")
_BRACE = re.compile(r"[{}]")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with balanced braces, or None.

    One pass over the braces (a stack), so linear in ``text`` however many ``\\boxed{`` stay unclosed."""
    opens = [m.end() for m in _BOXED.finditer(text)]
    if not opens:
        return None
    wanted = {p - 1 for p in opens}
    closes: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(text, opens[0] - 1):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            opened = stack.pop()
            if opened in wanted:
                closes[opened] = m.start()
    for start in reversed(opens):
        close = closes.get(start - 1)
        if close is not None:
            return text[start:close]
    return None


def boxed(text: str) -> str | Invalid:
    """The stripped content of the last balanced ``\\boxed{}``; Invalid when there is none or it is empty."""
    content = last_boxed(text)
    if content is None:
        return Invalid(reason="no \\boxed{...} found")
    return content.strip() or Invalid(reason="\\boxed{} is empty")


def last_integer(text: str, lo: int | None = None, hi: int | None = None) -> int | Invalid:
    """The last whole number written in ``text`` (not part of a decimal), checked against ``lo..hi``."""
    found = _INTEGER.findall(text)
    if not found:
        return Invalid(reason="no whole number found")
    value = int(found[-1])
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"{'' if lo is None else lo}..{'' if hi is None else hi}"
        return Invalid(reason=f"{value} is outside {span}")
    return value


def one_of(text: str, choices: Iterable[str], *, last: bool = True) -> str | Invalid:
    """The last (or first) of ``choices`` named in ``text`` as a whole word, case-insensitive.

    Returns the choice as spelled in ``choices``.
    """
    options = {c.lower(): c for c in choices}
    if not options:
        raise ValueError("one_of needs at least one choice")
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(c) for c in sorted(options, key=len, reverse=True)) + r")(?!\w)", re.I)
    found = pattern.findall(text)
    if not found:
        shown = ", ".join(list(options.values())[:8])
        return Invalid(reason=f"none of {shown} found")
    return options[(found[-1] if last else found[0]).lower()]


def centred(values: Mapping[str, float]) -> dict[str, float]:
    """Subtract the mean: the result sums to zero (a zero-sum version of any scores)."""
    if not values:
        return {}
    mean = sum(values.values()) / len(values)
    return {k: v - mean for k, v in values.items()}
