"""OpenSpiel-backed scripted players: each knows its own action distribution, so exploitability can
be computed for it exactly (``action_probs``), and it plays by sampling that distribution.

* ``random``: uniform over the legal actions (replaces the generic random-text bot here).
* ``cfr``: the average policy of OpenSpiel's CFR+ solver (``arena/games/openspiel/exact.py``,
  ``CFR_ITERATIONS`` iterations, solved once per game and cached): near Nash in Kuhn and Leduc.
* ``default``: ``cfr``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arena.games.openspiel.types import OpenSpielObservation


class UniformBot:
    """Uniformly random legal action."""

    def action_probs(self, obs: OpenSpielObservation) -> list[float]:
        return [1.0 / len(obs.legal)] * len(obs.legal) if obs.legal else []

    def __call__(self, obs: OpenSpielObservation, rng: np.random.Generator) -> str:
        return sample(obs.legal, self.action_probs(obs), rng)


class CfrBot(UniformBot):
    """OpenSpiel's CFR+ average policy at the observation's information state."""

    def action_probs(self, obs: OpenSpielObservation) -> list[float]:
        from arena.games.openspiel.exact import cfr_policy

        if not obs.legal:
            return []
        row = cfr_policy(obs.game).policy_for_key(obs.info_state)
        probs = np.asarray([row[a] for a in obs.legal_ids], dtype=float)
        return (probs / probs.sum()).tolist() if probs.sum() > 0 else super().action_probs(obs)


def sample(names: Sequence[str], probs: Sequence[float], rng: np.random.Generator) -> str:
    if not names:
        return "pass"  # not this seat's turn: any text (the game never asks)
    return names[int(rng.choice(len(names), p=np.asarray(probs) / np.sum(probs)))]


BOTS = {"random": UniformBot(), "cfr": CfrBot(), "default": CfrBot()}
