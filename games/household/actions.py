"""Reading an action out of a completion: ``<think>...</think><action>...</action>``.

Any string is legal input; :func:`parse_action` returns the admissible action
text or :class:`~arena.game_types.Invalid` with the reason, and never raises.

* The action is the text inside the LAST ``<action>...</action>`` pair
  (case-insensitive tags). Missing -> invalid.
* With ``require_think`` (the public code's rule) a ``<think>...</think>`` pair
  must come before it. Missing -> invalid.
* The action text is normalised (lower case, spaces collapsed, quotes and a
  trailing full stop dropped; ``put X in Y`` / ``put X on Y`` read as ALFWorld's
  ``put X in/on Y``) and must then be one of the admissible actions; otherwise
  it is invalid (ALFWorld itself would answer "Nothing happens.").
"""

from __future__ import annotations

import re
from collections.abc import Collection

from arena.game_types import Invalid

_ACTION = re.compile(r"<action>(.*?)</action>", re.IGNORECASE | re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_PUT = re.compile(r"^put (.+?) (?:in|on|into|onto|in/on) (.+)$")
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Canonical form of an action text (see the module docstring)."""
    text = _SPACES.sub(" ", text.strip().strip("\"'`").strip()).lower().rstrip(".").strip()
    m = _PUT.match(text)
    return f"put {m.group(1)} in/on {m.group(2)}" if m else text


def parse_action(completion: str, admissible: Collection[str], require_think: bool = True) -> str | Invalid:
    """The admissible action ``completion`` names, or why it names none."""
    found = list(_ACTION.finditer(completion))
    if not found:
        return Invalid(reason="no <action>...</action> found")
    last = found[-1]
    if require_think and not _THINK.search(completion, 0, last.start()):
        return Invalid(reason="no <think>...</think> before the action")
    action = normalise(last.group(1))
    if not action:
        return Invalid(reason="empty action")
    if action not in admissible:
        return Invalid(reason=f"not an admissible action: {action[:60]!r}")
    return action


def format_action(action: str, thought: str = "I follow the plan.") -> str:
    """A well-formed completion for ``action`` (bots, tests, examples)."""
    return f"<think>{thought}</think><action>{action}</action>"
