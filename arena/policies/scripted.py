"""Scripted policies: deterministic bots for tests, demos and baselines.

A bot is a pure function ``(observation, rng) -> completion text``. A
:class:`ScriptedPolicy` serves a batch of requests by calling its bot on each
request's typed observation with an RNG seeded from the request, so a seeded
game played by bots is reproducible byte for byte. Games ship their own bots
(``LLMGame.scripted_bots``: a dict of bots, or a ``module:attribute`` naming one); ``random`` works
for every game.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from arena.core.messages import random_text
from arena.core.registry import load_entry_point
from arena.policies.base import Completion, Request

Bot = Callable[[Any, np.random.Generator], str]


def random_bot(observation: Any, rng: np.random.Generator) -> str:
    """Random unicode of up to 200 characters: the worst-case model."""
    return random_text(rng, 200)


GENERIC_BOTS: dict[str, Bot] = {"random": random_bot}


class ScriptedPolicy:
    """A :class:`~arena.policies.base.Policy` backed by a bot function."""

    def __init__(self, bot: Bot, name: str = "scripted", seed: int = 0):
        self.bot = bot
        self.name = name
        self._fallback = np.random.default_rng(seed)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for req in requests:
            rng = np.random.default_rng(req.seed) if req.seed is not None else self._fallback
            out.append(Completion(text=self.bot(req.observation, rng)))
        return out


def available_bots(game_cls: type) -> dict[str, Bot]:
    """Generic bots plus the game's own (``game_cls.scripted_bots``)."""
    bots = dict(GENERIC_BOTS)
    spec = getattr(game_cls, "scripted_bots", "")
    if spec:  # a dict on the class, or "module:attribute" naming one (imported only when asked for)
        game_bots: Mapping[str, Bot] = spec if isinstance(spec, Mapping) else load_entry_point(spec)
        bots.update(game_bots)
    return bots


def make_bot(game_cls: type, spec: str) -> Bot:
    """``name`` or ``name:arg`` (e.g. ``fixed_vote:2``) -> a bot; unknown names list the valid ones."""
    name, _, arg = spec.partition(":")
    bots = available_bots(game_cls)
    if name not in bots:
        raise ValueError(f"unknown bot {name!r} for {game_cls.__name__}; available: {', '.join(sorted(bots))}")
    bot = bots[name]
    if arg:
        factory = getattr(bot, "with_arg", None)
        if factory is None:
            raise ValueError(f"bot {name!r} takes no argument (got {arg!r})")
        return factory(arg)
    return bot
