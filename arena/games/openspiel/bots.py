"""OpenSpiel-backed scripted players: each knows its own action distribution, so exploitability can
be computed for it exactly (``action_probs``), and it plays by sampling that distribution.

* ``random``: uniform over the legal actions (replaces the generic random-text bot here).
* ``cfr``: the average policy of OpenSpiel's CFR+ solver (``arena/exact/references.py``,
  ``CFR_ITERATIONS`` iterations, solved once per game and cached): near Nash in Kuhn and Leduc.
* ``br:<bot>`` (``br`` alone: ``br:cfr``): OpenSpiel's exact best response to the bot ``<bot>`` of
  this list (``random`` or ``cfr``) in the other seats (:func:`best_response_to_bot`: solved once per game and cached; deterministic). It needs every information
  state enumerated: a config that seats it on a game with more than ``BR_MAX_STATES`` of them is refused
  at start-up, one line naming the field, the game and the limit (``check_settings``, called by the
  config check), and so is its first move should it be played anyway. Playing a seat against it is the
  sampled form of exploitability descent.
* ``br:current``: the exact best response to the policy the trainable model plays right now, at
  every seat (``arena.train`` recomputes it from the model's exact action probabilities every
  ``train.respond.every`` steps, before the step's games; :meth:`BestResponseBot.follow`). In free
  generation it responds to the played policy (invalid replies on the fallback), in
  ``action_mode: score`` to the exact one. Seated against the model (or as a league bot, so the model
  meets it in every seat), training against it is the sampled form of exploitability descent
  (Lockhart et al., 2019): each step the model's policy gradient is taken against its current best
  responder. It is deterministic, and it follows the run's FIRST trainable policy. Outside
  ``arena.train`` (``arena.play``, tournaments) there is no current policy to respond to: its first
  move is refused with one line.
* ``default``: ``cfr``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from arena.games.openspiel.types import OpenSpielObservation


class UniformBot:
    """Uniformly random legal action."""

    def action_probs(self, obs: OpenSpielObservation) -> list[float]:
        return [1.0 / len(obs.legal)] * len(obs.legal) if obs.legal else []

    def __call__(self, obs: OpenSpielObservation, rng: np.random.Generator) -> str:
        return sample(obs.legal, self.action_probs(obs), rng)


#: The largest game (information states) a best-response bot enumerates (as OpenSpielConfig's default).
BR_MAX_STATES = 20_000


class CfrBot(UniformBot):
    """OpenSpiel's CFR+ average policy at the observation's information state."""

    def action_probs(self, obs: OpenSpielObservation) -> list[float]:
        from arena.exact.references import cfr_policy

        if not obs.legal:
            return []
        row = cfr_policy(obs.game).policy_for_key(obs.info_state)
        probs = np.asarray([row[a] for a in obs.legal_ids], dtype=float)
        return (probs / probs.sum()).tolist() if probs.sum() > 0 else super().action_probs(obs)


#: ``br:current``'s target: the trainable policy as it is now.
CURRENT = "current"
#: ``br:current``'s tables, per game string (``str(pyspiel game)``), set by :meth:`BestResponseBot.follow`:
#: one process trains one run, and every ``br:current`` bot of that run reads the same table.
FOLLOWED: dict[str, Any] = {}


class BestResponseBot(UniformBot):
    """OpenSpiel's exact best response to another bot of this game (``br:<bot>``), or to the trainable
    policy as it is now (``br:current``)."""

    def __init__(self, target: str = "cfr"):
        self.target = target

    @property
    def follows(self) -> bool:
        """Whether this bot responds to the trainable policy (``br:current``): the trainer then calls
        :meth:`follow` every ``train.respond.every`` steps."""
        return self.target == CURRENT

    def follow(self, env: Any, action_probs: Any) -> None:
        """Recompute ``br:current`` for ``env``'s configured game (an ``OpenSpielGame``) as the exact best
        response to the policy the seats answering ``action_probs`` play
        (``arena.exact.best_response.best_response_to_policy``)."""
        from arena.exact.best_response import best_response_to_policy

        tree = env.exact_tree()
        FOLLOWED[str(tree.game)] = best_response_to_policy(tree, action_probs)

    @staticmethod
    def followed() -> dict[str, list[list[float]]]:
        """The ``br:current`` tables as plain lists (a checkpoint's ``responders.json``)."""
        return {game: table.action_probability_array.tolist() for game, table in FOLLOWED.items()}

    @staticmethod
    def restore(saved: dict[str, list[list[float]]]) -> None:
        """Put back :meth:`followed`'s tables (``--resume``): the same responder as the straight run, even
        between two recomputations."""
        import pyspiel
        from open_spiel.python import policy as os_policy

        FOLLOWED.clear()
        for game, rows in saved.items():
            table = os_policy.TabularPolicy(pyspiel.load_game(game))
            table.action_probability_array[:] = np.asarray(rows, dtype=float)
            FOLLOWED[game] = table

    def with_arg(self, arg: str) -> BestResponseBot:
        targets = sorted([k for k in BOTS if k not in ("br", "default")] + [CURRENT])
        if arg not in targets:
            raise ValueError(f"br:{arg}: a best response is to one of this game's bots: "
                             f"{', '.join(f'br:{t}' for t in targets)}")
        return BestResponseBot(arg)

    def too_large(self, game: str) -> str:
        return (f"scripted:br:{self.target}: {game} has more than {BR_MAX_STATES} information states; an exact best "
                "response enumerates them all, so the br bots are for small games such as kuhn_poker and leduc_poker")

    def check_settings(self, settings: Any) -> None:
        """Refuse, at start-up, a configured game (an ``OpenSpielConfig``) with more than ``BR_MAX_STATES``
        information states: ``ValueError`` with :meth:`too_large`'s line (a walk that stops past the limit)."""
        from arena.exact.tree import TooLarge, count_info_states

        game = settings.load()
        try:
            count_info_states(game, BR_MAX_STATES)
        except TooLarge:
            raise ValueError(self.too_large(str(game))) from None

    def action_probs(self, obs: OpenSpielObservation) -> list[float]:
        from arena.core.errors import ConfigError
        from arena.exact.tree import TooLarge

        if not obs.legal:
            return []
        if self.follows:
            if obs.game not in FOLLOWED:
                raise ConfigError(f"scripted:br:current responds to the trainable policy, which arena.train gives it "
                                  f"before each step (train.respond.every); there is none here for {obs.game}: seat "
                                  "br:cfr or br:random outside training")
            row = FOLLOWED[obs.game].policy_for_key(obs.info_state)
            return [float(row[a]) for a in obs.legal_ids]
        try:
            table = best_response_to_bot(obs.game, self.target, BR_MAX_STATES)
        except TooLarge:
            raise ConfigError(self.too_large(obs.game)) from None
        row = table.policy_for_key(obs.info_state)
        return [float(row[a]) for a in obs.legal_ids]


def sample(names: Sequence[str], probs: Sequence[float], rng: np.random.Generator) -> str:
    if not names:
        return "pass"  # not this seat's turn: any text (the game never asks)
    return names[int(rng.choice(len(names), p=np.asarray(probs) / np.sum(probs)))]


BOTS = {"random": UniformBot(), "cfr": CfrBot(), "br": BestResponseBot(), "default": CfrBot()}


@lru_cache(maxsize=16)
def best_response_to_bot(game_string: str, target: str, max_states: int) -> Any:
    """The exact best response (``arena.exact.best_response.best_response_table``) to the bot ``target`` of
    this list, cached; :class:`~arena.exact.tree.TooLarge` (one line) for a game with more than ``max_states``
    information states."""
    import pyspiel
    from open_spiel.python import policy as os_policy

    from arena.exact.best_response import best_response_table
    from arena.exact.tree import count_info_states
    from arena.games.openspiel.view import observe

    game = pyspiel.load_game(game_string)
    count_info_states(game, max_states)
    name = game.get_type().short_name
    table = os_policy.TabularPolicy(game)
    for row, state in enumerate(table.states):
        obs = observe(name, state, state.current_player())
        table.action_probability_array[row] = 0.0
        table.action_probability_array[row, list(obs.legal_ids)] = BOTS[target].action_probs(obs)
    return best_response_table(game, table)
