"""SpyRL's rules as pure functions: masking, parsing, rewards.

Nothing here touches an env or global state; ``arena/games/spy/env.py`` wires these into
PettingZoo and ``arena/games/spy/__init__.py``'s docstring is the spec they implement.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from arena.core.game import Invalid
from arena.core.rules import last_boxed

NA = "N/A"
Vote = int | Literal["N/A"]


# ------------------------------------------------------------------ masking g(x)
@dataclass(frozen=True)
class MaskedView:
    """The spy's view g(x) and where the masked span lies (in units)."""

    text: str
    start: int
    length: int
    units: int


_WORD_SPLIT = re.compile(r"(\s+)")


def split_units(text: str, unit: Literal["words", "chars"]) -> list[str]:
    """Words (whitespace-separated, separators kept aside) or characters."""
    if unit == "chars":
        return list(text)
    return [w for w in _WORD_SPLIT.split(text) if w and not w.isspace()]


def span_length(units: int, ratio: float) -> int:
    """Length of the masked span: ``ratio * units`` rounded half up, at least 1, at most ``units``.

    The product is first rounded to 9 decimals so float noise cannot move a half:
    ``0.58 * 25`` is ``14.499999999999998`` in binary and must give 15, like ``0.25 * 10`` gives 3.
    """
    return min(units, max(1, int(math.floor(round(ratio * units, 9) + 0.5))))


def mask_span(
    text: str,
    ratio: float,
    rng: np.random.Generator,
    unit: Literal["words", "chars"] = "words",
    token: str = "*",
) -> MaskedView:
    """g(x): replace ONE contiguous span of ``ratio`` of the units with ``token``.

    Each masked word becomes one ``token`` (whitespace is kept), each masked
    character becomes one ``token``, so the spy sees that something is missing
    and how much. The span's start is uniform over the valid positions.
    """
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"mask ratio must be in (0, 1), got {ratio}")
    if unit == "chars":
        n = len(text)
        if n == 0:
            raise ValueError("cannot mask an empty source")
        length = span_length(n, ratio)
        start = int(rng.integers(0, n - length + 1))
        return MaskedView(text[:start] + token * length + text[start + length :], start, length, n)
    pieces = _WORD_SPLIT.split(text)
    word_slots = [i for i, p in enumerate(pieces) if p and not p.isspace()]
    n = len(word_slots)
    if n == 0:
        raise ValueError("cannot mask a source with no words")
    length = span_length(n, ratio)
    start = int(rng.integers(0, n - length + 1))
    for slot in word_slots[start : start + length]:
        pieces[slot] = token
    return MaskedView("".join(pieces), start, length, n)


#: A number: digits, with internal ``,`` / ``.`` groups ("1,200", "2.5"), not inside a word ("B12", "3rd").
_NUMBER = re.compile(r"(?<![^\W_])(?<!\d[.,])\d+(?:[.,]\d+)*(?![^\W_])")
#: A name: a capitalised word after a lowercase word or a comma, so not a sentence's first word.
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?:-[A-Z][a-z]+)?\b")


def mask_fact(text: str, rng: np.random.Generator, token: str = "*") -> MaskedView | None:
    """g(x) with ``mask: fact``: ONE concrete fact hidden wherever it appears. The fact is a number drawn
    uniformly among the text's distinct numbers (``_NUMBER``), else a name among its distinct names
    (``_NAME``); every occurrence becomes ``token``. ``start``: the first occurrence's index in words;
    ``length``: the occurrences hidden; ``units``: the text's words. None: the text has neither (the caller
    masks a span instead)."""
    for pattern in (_NUMBER, _NAME):
        found = list(pattern.finditer(text))
        if found:
            values = sorted({m.group() for m in found})
            fact = values[int(rng.integers(len(values)))]
            hits = [m for m in found if m.group() == fact]
            out, at = [], 0
            for m in hits:
                out += [text[at:m.start()], token]
                at = m.end()
            view = "".join(out) + text[at:]
            return MaskedView(view, len(split_units(text[: hits[0].start()], "words")), len(hits),
                              len(split_units(text, "words")))
    return None


# ------------------------------------------------------------------ parsing
_ANSWER = re.compile(r"(?im)^[ \t>*#_]*answer[ \t*_]*:[*_]*")


def parse_answer(text: str, require_answer_line: bool) -> str | None:
    """The performed output: the text after the last line starting ``Answer:``.

    Without such a line, None when ``require_answer_line`` (the paper's format),
    else the whole text. Empty answers are None.
    """
    matches = list(_ANSWER.finditer(text))
    if matches:
        answer = text[matches[-1].end() :].strip()
    elif require_answer_line:
        return None
    else:
        answer = text.strip()
    return answer or None


_NA_FORMS = {"n/a", "na", "none", "n.a", "n / a"}  # after stripping "$ ." ("N.A." -> "n.a")
_PLAYER_PREFIX = re.compile(r"(?i)^(?:player|p)\s*")


_LOOSE_VOTE = re.compile(r"(?ai)\bplayer\s*+(?:#\s*+)?(\d{1,6})\b|\b(N/A)\b")  # possessive: linear in whitespace runs
_INDEX = re.compile(r"[0-9]{1,6}")  # ASCII digits only: no sign, no other scripts' digits


def parse_vote(text: str, n_players: int, lenient: bool = False) -> Vote | Invalid:
    """``\\boxed{k}`` -> k, ``\\boxed{N/A}`` -> "N/A"; anything else -> :class:`Invalid`.

    The last ``\\boxed{}`` counts; ``Player 3`` / ``p3`` / ``$3$`` / ``03`` are read as 3.
    A player index is written in ASCII digits without a sign (the paper's format:
    ``\\boxed{k}`` with ``k`` in ``0..n-1``), so ``\\boxed{-0}``, ``\\boxed{+1}`` and
    non-ASCII digits (``\\boxed{３}``, ``\\boxed{٣}``) are Invalid, as is ``\\boxed{n}``.
    ``lenient`` (not the paper's rule): without any ``\\boxed{}``, the last
    ``Player k`` or ``N/A`` mentioned in the text is the vote.
    """
    content = last_boxed(text)
    if content is None and lenient:
        mentions = list(_LOOSE_VOTE.finditer(text))
        if mentions:
            last = mentions[-1]
            content = last.group(1) or last.group(2)
    if content is None:
        return Invalid(reason="no \\boxed{...} vote found")
    value = _PLAYER_PREFIX.sub("", content.strip().strip("$ .")).strip()
    if value.lower() in _NA_FORMS:
        return NA
    if _INDEX.fullmatch(value):
        k = int(value)
        if k < n_players:
            return k
        return Invalid(reason=f"vote {k} is not a player index 0..{n_players - 1}")
    return Invalid(reason=f"vote {content[:40]!r} is neither a player index nor N/A")


# ------------------------------------------------------------------ rewards
def vote_counts(votes: Sequence[Vote | None], n_players: int) -> list[int]:
    """m_j: votes received by each player; N/A and invalid (None) are not counted."""
    counts = [0] * n_players
    for v in votes:
        if isinstance(v, int) and not isinstance(v, bool):
            counts[v] += 1
    return counts


def spy_caught(counts: Sequence[int], spy: int) -> bool:
    """The spy is caught when it alone received the most valid votes (and at least one)."""
    top = max(counts)
    return top > 0 and counts[spy] == top and counts.count(top) == 1


def performing_rewards(counts: Sequence[int], spy: int, beta: float, lam: float) -> list[float]:
    """Zero-sum performing rewards.

    spy: ``-beta * (m_u - mc)``; civilian j: ``(beta/nc) * (m_u - mc) - lam * (m_j - mc)``
    where ``mc`` is the mean votes over civilians and ``nc = n - 1``. Sums to 0.
    """
    n = len(counts)
    nc = n - 1
    mc = sum(c for j, c in enumerate(counts) if j != spy) / nc
    gap = counts[spy] - mc
    return [-beta * gap if j == spy else (beta / nc) * gap - lam * (counts[j] - mc) for j in range(n)]


def detection_reward_paper(vote: Vote | None, spy: int) -> float:
    """``1[v == u]``; N/A and invalid votes earn 0."""
    return 1.0 if vote == spy and isinstance(vote, int) else 0.0


def detection_reward_shaped(vote: Vote | None, spy: int, voter_is_spy: bool, voter: int | None) -> float:
    """The public code's shaped detection reward.

    Civilian voter (or god detector): correct ``0.3*(2*1-1) + 1.2*1 + 0.99 = 2.49``,
    wrong -1, N/A -0.5, unparseable -1. Spy voter: itself -1, N/A +0.2, any
    other player +0.5, unparseable -1.
    """
    if vote is None:
        return -1.0
    if voter_is_spy:
        if vote == NA:
            return 0.2
        return -1.0 if vote == voter else 0.5
    if vote == NA:
        return -0.5
    if vote == spy:
        fmt_ok, acc = 1.0, 1.0
        return 0.3 * (2 * fmt_ok - 1) + 1.2 * acc + 0.99 * (1.0 if acc > 0 else 0.0)
    return -1.0
