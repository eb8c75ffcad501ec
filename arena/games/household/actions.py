"""Reading an action out of a completion: ``<think>...</think><action>...</action>``.

Any string is legal input; :func:`parse_action` returns the admissible action
text or :class:`~arena.core.game_types.Invalid` with the reason, and never raises.

* The action is the text inside the LAST ``<action>...</action>`` pair
  (case-insensitive tags). Missing -> invalid.
* With ``require_think`` (the public code's rule) a ``<think>...</think>`` pair
  must come before it. Missing -> invalid.
* The action text is normalised (lower case, spaces collapsed, quotes and
  trailing full stops dropped; ``put X in|on|into|onto Y`` read as ALFWorld's
  ``put X in/on Y``) and must then be one of the admissible actions; otherwise
  it is invalid (ALFWorld itself would answer "Nothing happens.").

``match="nearest"`` (a CPU switch, off by default; not in the public code) reads
more: an unclosed last ``<action>`` counts up to the end of the text, a text with
no tag at all counts whole, and a text that is not admissible maps to the
admissible action sharing the most words with it (:func:`nearest_action`).
Free-form outputs mapped to the closest admissible action is how several
ALFWorld baselines let small or untuned models act; SmolLM2-135M never names an
admissible action exactly (0 of 16 samples, even with the reply opened by
``<action>``), so without it no attempt ever acts and GRPO has nothing to learn.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from arena.core.game_types import Invalid

_CLOSE = re.compile(r"</action>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_PUT = re.compile(r"^put (.+?) (?:in|on|into|onto|in/on) (.+)$")
_SPACES = re.compile(r"\s+")
_OPEN = re.compile(r"<action>", re.IGNORECASE)
_WORDS = re.compile(r"[a-z0-9]+")
# Words every command shares; a match on these alone names no action.
_GLUE = frozenset({"go", "to", "in", "on", "with", "from", "the", "a", "an"})


def normalise(text: str) -> str:
    """Canonical form of an action text (see the module docstring)."""
    text = _SPACES.sub(" ", text.strip().strip("\"'`").strip()).lower().rstrip(".").strip()
    m = _PUT.match(text)
    return f"put {m.group(1)} in/on {m.group(2)}" if m else text


def nearest_action(text: str, admissible: Collection[str]) -> str | None:
    """The admissible action whose words overlap ``text``'s most (Jaccard of the word sets).

    ``|W(text) & W(a)| / |W(text) | W(a)|`` with W the lower-case alphanumeric words; ties go
    to the action listed first. None when no action shares a word outside the command
    glue (go, to, in, on, with, from, articles).
    """
    words = set(_WORDS.findall(text.lower()))
    best, best_score = None, 0.0
    for action in admissible:
        aw = set(_WORDS.findall(action))
        shared = words & aw
        if not shared - _GLUE:
            continue
        score = len(shared) / len(words | aw)
        if score > best_score:
            best, best_score = action, score
    return best


def _action_text(completion: str, nearest: bool) -> tuple[str, int] | None:
    """The action's text and where it starts; None when there is none to read."""
    found = _last_action(completion)
    opened = list(_OPEN.finditer(completion)) if nearest else []
    if opened and (found is None or opened[-1].start() > found[1]):
        return completion[opened[-1].end():], opened[-1].start()
    if found is not None:
        return found
    return (completion, 0) if nearest else None


def _last_action(completion: str) -> tuple[str, int] | None:
    """The last ``<action>...</action>`` (what a lazy regex's finditer would find last) and where it starts.

    Walks the tags left to right, so it is linear in the text however many ``<action>`` stay unclosed."""
    last, pos = None, 0
    while (opened := _OPEN.search(completion, pos)) is not None:
        closed = _CLOSE.search(completion, opened.end())
        if closed is None:
            break
        last, pos = (completion[opened.end():closed.start()], opened.start()), closed.end()
    return last


def _thought_before(completion: str, end: int) -> bool:
    """Whether a whole ``<think>...</think>`` lies before ``end`` (two linear searches)."""
    opened = _THINK_OPEN.search(completion, 0, end)
    return opened is not None and _THINK_CLOSE.search(completion, opened.end(), end) is not None


def parse_action(
    completion: str, admissible: Collection[str], require_think: bool = True, match: str = "exact"
) -> str | Invalid:
    """The admissible action ``completion`` names, or why it names none (``match``: exact | nearest)."""
    nearest = match == "nearest"
    read = _action_text(completion, nearest)
    if read is None:
        return Invalid(reason="no <action>...</action> found")
    text, start = read
    if require_think and not _thought_before(completion, start):
        return Invalid(reason="no <think>...</think> before the action")
    action = normalise(text)
    if not action:
        return Invalid(reason="empty action")
    if action in admissible:
        return action
    if nearest:
        close = nearest_action(action, admissible)
        if close is not None:
            return close
    return Invalid(reason=f"not an admissible action: {action[:60]!r}")


def format_action(action: str, thought: str = "I follow the plan.") -> str:
    """A well-formed completion for ``action`` (bots, tests, examples)."""
    return f"<think>{thought}</think><action>{action}</action>"
