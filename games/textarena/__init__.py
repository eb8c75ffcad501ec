"""TextArena games as arena games (``textarena_v0``).

Any environment id of TextArena (``textarena`` 0.7.4, offline) plays as an arena
game: ``game: {name: textarena, env_id: KuhnPoker-v0}``. SPIRAL's three,
``TicTacToe-v0``, ``KuhnPoker-v0`` and ``SimpleNegotiation-v0``, are tested and
have YAMLs here.
"""

from __future__ import annotations

from games.textarena.env import TextArenaGame, env
from games.textarena.types import TextArenaConfig, TextArenaObservation

__all__ = ["TextArenaConfig", "TextArenaGame", "TextArenaObservation", "env"]
