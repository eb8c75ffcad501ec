"""Scripted SpyRL players for tests, demos and baselines.

* ``extractive``: performs by quoting the first words of its view; votes for the
  player whose answer overlaps least with its own view (mask tokens count as
  foreign), or N/A when nobody stands out. The spy votes for someone else.
* ``copycat``: a spy that hides its mask: it quotes its view with the masked
  span dropped, so its answer looks like the civilians'. Civilians play
  ``extractive``.
* ``default``: ``copycat`` (the strongest scripted play).
* ``fixed_vote[:k]``: a one-line answer, always votes ``\\boxed{k}`` (default 0).
"""

from __future__ import annotations

import re

import numpy as np

from arena.games.spy.types import SpyObservation

QUOTE_WORDS = 200


def _words(text: str) -> list[str]:
    return re.findall(r"[\w']+|[^\w\s]+", text.lower())


def _quote(view: str, mask: str, drop_mask: bool) -> str:
    words = view.split()
    if drop_mask:
        words = [w for w in words if w.strip(mask)]
    return " ".join(words[:QUOTE_WORDS])


def _suspect(obs: SpyObservation) -> int | None:
    own = set(_words(obs.view))
    scores: dict[int, float] = {}
    for player, text in zip(obs.output_players, obs.outputs, strict=True):
        if player == obs.seat_index and obs.role != "detector":
            continue
        words = _words(text)
        foreign = sum(w not in own or obs.mask_token in w for w in words)
        scores[player] = foreign / max(1, len(words)) + (1.0 if obs.mask_token * 2 in text else 0.0)
    if not scores:
        return None
    best = max(scores.values())
    leaders = [p for p, s in scores.items() if s == best]
    return leaders[0] if len(leaders) == 1 and best > 0 else None


def _vote(obs: SpyObservation, rng: np.random.Generator) -> str:
    if obs.role == "spy":
        others = [p for p in range(obs.n_players) if p != obs.seat_index]
        return f"I will point elsewhere.\n\\boxed{{{others[int(rng.integers(len(others)))]}}}"
    suspect = _suspect(obs)
    if suspect is None:
        return "Nobody stands out.\n\\boxed{N/A}"
    return f"Player {suspect}'s answer departs most from my copy.\n\\boxed{{{suspect}}}"


def extractive(obs: SpyObservation, rng: np.random.Generator) -> str:
    if obs.phase == "vote":
        return _vote(obs, rng)
    return f"I quote the opening of my copy.\nAnswer: {_quote(obs.view, obs.mask_token, drop_mask=False)}"


def copycat(obs: SpyObservation, rng: np.random.Generator) -> str:
    if obs.phase == "vote" or obs.role != "spy":
        return extractive(obs, rng)
    return f"I quote the opening of my copy.\nAnswer: {_quote(obs.view, obs.mask_token, drop_mask=True)}"


class FixedVote:
    """Answers in one line and always votes for the same player."""

    def __init__(self, target: int = 0):
        self.target = target

    def __call__(self, obs: SpyObservation, rng: np.random.Generator) -> str:
        if obs.phase == "vote":
            return f"\\boxed{{{self.target}}}"
        return "Answer: a one-line output."

    def with_arg(self, arg: str) -> FixedVote:
        if not arg.isdigit():
            raise ValueError(f"fixed_vote takes a player index, got {arg!r}")
        return FixedVote(int(arg))


BOTS = {"extractive": extractive, "copycat": copycat, "default": copycat, "fixed_vote": FixedVote()}
