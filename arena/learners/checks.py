"""Start-up checks of the learner's config against the game it trains on: pure functions the loop calls
once the game is known, before any model loads (a failure is one ``ConfigError`` line, exit code 2).

:func:`check_game`: an estimator that ``requires`` a capability (``obs_baseline``: a baseline per
observation needs observations that recur) on a game that does not declare it.
"""

from __future__ import annotations

from typing import Any

from arena.core.errors import ConfigError
from arena.learners.config import LearnerConfig
from arena.learners.estimators import get_estimator


def check_game(game: Any, cfg: LearnerConfig) -> None:
    """Raise a one-line :class:`~arena.core.errors.ConfigError` when an estimator of ``cfg`` needs a capability
    ``game`` (an ``LLMGame`` class or instance) does not declare: each flag in the estimator's ``requires``
    (``arena.learners.estimators.register_estimator``) must be a true attribute of the game."""
    name = getattr(game, "metadata", {}).get("name") or getattr(game, "__name__", type(game).__name__)
    for phase, est in cfg.estimators.items():
        for flag in get_estimator(est.name).requires:
            if not getattr(game, flag, False):
                raise ConfigError(
                    f"learner.estimators.{phase}: {est.name} keeps an estimate per observation, but game {name} does "
                    f"not declare {flag} (its observations do not recur, so every estimate would be a first sight); "
                    f"use grpo, dr_grpo or rae, or declare {flag} = True on the game if they do recur"
                )
