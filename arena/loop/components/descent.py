"""``train.descent``: each step's samples are the whole game tree, not played games.

Exploitability descent, full width (arena/exact/descent.py; Lockhart et al., 2019). Before
the update of every step the trainable policy's exact action probabilities are scored at every
information state (the first trainable policy at every seat, at its sampling settings for the game's
first phase, no gradient, the global RNGs saved and restored), and the game returns the advantages
``A(I, a) = c(I) pi(a|I) (q(I, a) - v(I))`` against the exact best response to that policy. The step
trains on one sample per legal action of every information state: the prompt the seat sees at ``I``,
the action's text as the completion (``action_ids``: its tokens, then end of sequence), the other
legal texts as its ``alternatives`` (so the loss sees ``log pi(a|I)`` normalised over the legal
actions, exactly as ``action_mode: score`` plays), the first phase, weight 1 and advantage
``A(I, a)`` (``train.descent.weighting: natural``: ``c(I) (q(I, a) - v(I))``; ``train.descent.bound``: 0 where it
would push a probability out of ``[bound, 1 - bound]``): the estimator is not used. At one update per batch the learner's policy-gradient term is
``- sum A(I, a) grad log pi(a|I)``: ED's gradient. No game is played; ``descent/exploitability`` logs
the exploitability of the policy before the step's update (the best responder's mean value, from the
same tree walk), ``time/descent_s`` the scoring and the walk.

The learner's loss must make the gradient ``-A grad log pi``: ``loss: clipped`` or ``reinforce`` at
``updates_per_batch: 1`` with ``beta`` 0 and any aggregation that weights every token alike
(``token`` or ``constant``: each action's tokens sum to ``log pi(a|I)``). Refused at start-up
otherwise, as are a game that is no ``arena.exact.ExactGame`` (OpenSpiel games are), ``action_mode`` other
than ``score``, a league, async rollouts and several trainable policies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.core.errors import ConfigError
from arena.core.types import Sample
from arena.loop.component import Component, StepContext


class DescentConfig(BaseModel):
    """``train.descent``: exploitability descent, full width (this module). Present: on; null or absent: off."""

    model_config = ConfigDict(extra="forbid")

    weighting: Literal["policy", "natural"] = Field(
        default="policy", description="The advantages (arena/exact/descent.py): policy, ED's c(I) pi(a|I) "
        "(q - v) (Lockhart et al.); natural, c(I) (q - v), the natural-gradient direction of softmax policies, which "
        "does not vanish as the policy saturates.",
    )
    bound: float = Field(
        default=0.0, ge=0.0, lt=0.5, description="An action's advantage is set to 0 where it would push its "
        "probability above 1 - bound or below bound (arena/exact/descent.py bounded); 0: off (Lockhart "
        "et al. have none).",
    )


def check(cfg: Any, game: Any, origin: str = "config") -> None:
    """The one-line ``ConfigError`` for a run ``train.descent`` cannot drive (module docstring)."""
    from arena.exact.tree import ExactGame

    head = f"{origin}: train.descent"
    if not isinstance(game, ExactGame):
        raise ConfigError(f"{head} needs a game whose tree can be walked (an arena.exact.ExactGame, as game.name: "
                          f"openspiel); {game.metadata['name']} is not one")
    if getattr(cfg.game.settings, "action_mode", None) != "score":
        raise ConfigError(f"{head} needs game.action_mode: score (the policy it descends is the one scored), "
                          f"got {getattr(cfg.game.settings, 'action_mode', None)!r}")
    trainable = cfg.trainables
    others = {seat: name for seat, name in cfg.seat_table().items() if trainable and name != trainable[0]}
    if others:
        seat, name = next(iter(others.items()))
        raise ConfigError(f"{head} descends the trainable policy at every seat (the tree has no other player), but "
                          f"seats.{seat} plays {name!r}; map every seat to {trainable[0]!r} or turn train.descent off")
    if len(trainable) != 1:
        raise ConfigError(f"{head} descends one trainable policy's exploitability, got {len(trainable)}: {trainable}")
    learner = cfg.learner_for(trainable[0])
    if learner.aggregation not in ("token", "constant") or learner.updates_per_batch != 1 or learner.beta != 0:
        raise ConfigError(f"{head} needs learner.aggregation token or constant, learner.updates_per_batch 1 and "
                          f"learner.beta 0 (the gradient must be -A grad log pi), got {learner.aggregation!r}, "
                          f"{learner.updates_per_batch}, {learner.beta}")
    if cfg.train.league.enabled or cfg.train.async_ is not None:
        raise ConfigError(f"{head} plays no games: train.league.enabled and train.async must be off")
    from arena.exact.descent import check_game

    try:
        check_game(game.exact_tree())
    except ValueError as e:
        raise ConfigError(f"{head}: {' '.join(str(e).split())}") from None


class Descent(Component):
    """The step's samples from the tree (module docstring)."""

    name = "descent"
    section = DescentConfig | None
    section_doc = ("Exploitability descent, full width (Lockhart et al., 2019; arena/loop/components/descent.py): each "
                   "step trains on every information state against the exact best response instead of played games; "
                   "{} for the defaults, null: off.")

    def __init__(self, cfg: Any, env: Any, policies: Mapping[str, Any], sampling: Any):
        """``cfg`` has passed :func:`check` (``load_config``'s start-up checks run it)."""
        self.cfg, self.env, self.policies, self.sampling = cfg, env, policies, sampling
        self.section: DescentConfig = cfg.train.descent
        self.tree: list[Sample] = []

    @classmethod
    def migrate(cls, train: dict[str, Any]) -> list[str]:
        """The old flat keys: ``exact_descent: true`` is ``descent: {}``; ``descent_weighting`` and
        ``descent_bound`` are its keys (without ``exact_descent: true`` they did nothing: refused)."""
        notes = []
        on = train.pop("exact_descent", None)
        moved = {k: train.pop(f"descent_{k}") for k in ("weighting", "bound") if f"descent_{k}" in train}
        if on is None and not moved:
            return notes
        if on is not True and moved:
            raise ValueError(f"descent_{next(iter(moved))}: has no effect without exact descent; write "
                             f"train.descent: {{{', '.join(f'{k}: {v}' for k, v in moved.items())}}} to turn it on")
        notes.append("train.exact_descent, train.descent_weighting and train.descent_bound are now train.descent: "
                     "{weighting, bound} (present: on)")
        if on is True:
            train.setdefault("descent", moved)
        return notes

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        if cfg.train.descent is not None:
            check(cfg, env, origin)

    @classmethod
    def build(cls, plan: Any, parts: Any) -> Descent | None:
        if plan.cfg.train.descent is None:
            return None
        return cls(plan.cfg, parts.probe_env, parts.runner.policies, parts.runner.sampling)

    def play(self, step: int) -> tuple[list[Any], dict[str, float]]:
        """No game: the whole tree, scored with the weights before the step's update."""
        self.tree, stats = self.samples_of_tree(step)
        return [], {"gen/tokens": 0.0, "time/play_s": 0.0, **stats}

    def samples(self, ctx: StepContext, unit: Any) -> tuple[list[Sample], dict[str, float]]:
        return self.tree, {}

    def samples_of_tree(self, step: int) -> tuple[list[Sample], dict[str, float]]:
        """One sample per legal action of every information state, and the step's figures."""
        from arena.exact.descent import descent_targets
        from arena.loop.exact import current_policy
        from arena.policies.base import Request
        from arena.policies.choices import action_ids

        t0 = time.perf_counter()
        trainable = self.cfg.trainable
        phase = self.env.phases[0] if self.env.phases else ""
        policy = self.policies[trainable]
        with current_policy(self.cfg, self.env, self.policies, self.sampling) as probs:
            queries, advantages, metrics = descent_targets(self.env.exact_tree(), probs, self.section.weighting,
                                                           self.section.bound)
        samples = []
        for q, adv in zip(queries, advantages, strict=True):
            prompt = policy.encode(Request(messages=q.messages, params=self.sampling(trainable, phase), seat=q.seat))
            texts = [action_ids(policy.tokenizer, a) for a in q.actions]
            for i, a in enumerate(adv):
                samples.append(Sample(prompt_ids=list(prompt), completion_ids=texts[i], advantage=float(a), phase=phase,
                                      role=q.seat, alternatives=[t for j, t in enumerate(texts) if j != i],
                                      extras={"group": q.seat, "finish_reason": "stop", "reward": 0.0}))
        stats = {f"descent/{k}": v for k, v in metrics.items()}
        stats |= {"descent/states": float(len(queries)), "descent/abs_advantage": sum(abs(s.advantage) for s in samples),
                  "time/descent_s": time.perf_counter() - t0}
        return samples, stats
