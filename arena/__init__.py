"""Self-play training of language models on games.

Game authors' short surface: ``from arena import LLMGame, GameConfig, Phase, Invalid, Message``
and the rest of ``__all__``, the contracts of :mod:`arena.core`, loaded on first use (so that
``import arena.cli`` stays light). The layers are drawn in docs/architecture.md and checked by
``lint-imports`` (pyproject.toml, ``[tool.importlinter]``).
"""

from __future__ import annotations

import importlib
from typing import Any

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
}
__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    if name in _SURFACE:
        return getattr(importlib.import_module(_SURFACE[name]), name)
    raise AttributeError(f"module 'arena' has no attribute {name!r}")
