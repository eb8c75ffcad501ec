"""Scripted TextArena players for tests, demos and baselines.

TextArena's observations quote the moves they accept, e.g. ``Available Moves:
'[0]', '[4]'`` (tic-tac-toe), ``Your available actions are: '[check]', '[bet]'``
(Kuhn poker), ``'[Offer: 3 Sheep, 2 Ore -> 5 Brick, 2 Sheep]'``, ``'[Accept]'``,
``'[Deny]'`` (negotiation).

* ``quoted`` (also ``default``): a uniformly random move among those quoted on the
  latest line of the observation that quotes any (the whole text if none does).
  In tic-tac-toe and Kuhn poker it is always legal; in the negotiation the quoted
  example offer may ask for resources the seat lacks (TextArena's invalid move).
"""

from __future__ import annotations

import re

import numpy as np

from arena.games.textarena.types import TextArenaObservation

_QUOTED = re.compile(r"'(\[[^\[\]'\n]{1,80}\])'")


def quoted_actions(text: str, last_line: bool = True) -> list[str]:
    """The ``'[...]'`` moves quoted in ``text``: on its last line that has any, or all of them, in order."""
    if not last_line:
        return list(dict.fromkeys(_QUOTED.findall(text)))
    for line in reversed(text.splitlines()):
        found = _QUOTED.findall(line)
        if found:
            return found
    return []


def quoted_bot(obs: TextArenaObservation, rng: np.random.Generator) -> str:
    moves = quoted_actions(obs.observation) or quoted_actions(obs.observation, last_line=False)
    return moves[int(rng.integers(len(moves)))] if moves else "[0]"


BOTS = {"quoted": quoted_bot, "default": quoted_bot}
