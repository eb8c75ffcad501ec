"""Self-play training of language models on games.

The author API: ``from arena import LLMGame, GameConfig, Phase, Invalid, Message`` and the rest of
``__all__`` (the contracts of :mod:`arena.core`, the conformance kit ``check_game``, and ``Runner``
with ``ScriptedPolicy`` to play a game by hand), loaded on first use so that ``import arena.cli``
stays light. These names, and the documented modules ``arena.testing``, ``arena.core.rules`` and
``arena.core.transcript``, are what a game, policy or config author imports; moves behind them keep a
deprecated alias for a release (:mod:`arena._compat`, CHANGELOG.md). The layers are drawn in docs/architecture.md and checked by
``lint-imports`` (pyproject.toml, ``[tool.importlinter]``).
"""

from __future__ import annotations

import importlib
from typing import Any

from arena import _compat  # noqa: F401 - old import paths (arena.game, games, ...) as deprecated aliases

_SURFACE = {
    "LLMGame": "arena.core.game",
    "GameConfig": "arena.core.game_types",
    "GameState": "arena.core.game_types",
    "Invalid": "arena.core.game_types",
    "InvalidOutputConfig": "arena.core.game_types",
    "NoOptions": "arena.core.game_types",
    "Phase": "arena.core.game_types",
    "TextGenerator": "arena.core.game_types",
    "Message": "arena.core.messages",
    "ChatMessage": "arena.core.types",
    "Episode": "arena.core.types",
    "SeatOutcome": "arena.core.types",
    "Turn": "arena.core.types",
    "ConfigError": "arena.core.errors",
    "format_episode": "arena.core.transcript",
    "last_integer": "arena.core.rules",
    # Playing and checking a game by hand (examples/, the write-a-game guide).
    "check_game": "arena.testing",
    "Runner": "arena.runner",
    "ScriptedPolicy": "arena.policies.scripted",
}
__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    if name in _SURFACE:
        return getattr(importlib.import_module(_SURFACE[name]), name)
    raise AttributeError(f"module 'arena' has no attribute {name!r}")
