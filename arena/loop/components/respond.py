"""Opponents that respond to the trainable policy as it is now (OpenSpiel's ``scripted:br:current``).

A bot that ``follows`` (a ``follows`` attribute that is true, and ``follow(game, action_probs)``)
is told the trainable policy's exact action probabilities before the games of step ``s`` whenever
``(s - 1) % train.respond.every == 0``: the FIRST trainable policy's generator at every seat, at
its sampling settings for the game's first phase (:func:`arena.loop.exact.policies_action_probs`),
with no gradient and the global RNGs saved and restored around it, so the step's games are what
they would be without the scoring. Training against the exact best response recomputed so is the
sampled form of exploitability descent (Lockhart et al., 2019).

The bots come from the seats (a policy ``scripted:<bot>``, or a scripted policy of the table) and
from ``train.league.bots``. A follower's state (its tables) is written into each checkpoint as
``responders.json`` and read back by ``--resume``, so a resumed run meets the same responder as the
straight run even between two recomputations. ``time/respond_s`` logs the cost.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.loop.component import Component

FILE = "responders.json"


class RespondConfig(BaseModel):
    """``train.respond``: how often the responding bots are recomputed (this module)."""

    model_config = ConfigDict(extra="forbid")

    every: int = Field(
        default=1, ge=1, description="Steps between recomputing the bots that respond to the trainable policy as it "
        "is now (scripted:br:current, as a seat or a league bot; arena/loop/components/respond.py): before the games "
        "of step s when (s - 1) % every == 0.",
    )


def find_follower(cfg: Any, policies: Mapping[str, Any]) -> Any:
    """The first bot of the run that follows the trainable policy, or ``None``."""
    from arena.policies.scripted import make_bot

    bots = [getattr(p, "bot", None) for p in policies.values()]
    if cfg.train.league.enabled:
        bots += [make_bot(cfg.game.cls, spec.removeprefix("scripted:")) for spec in cfg.train.league.bots]
    return next((b for b in bots if getattr(b, "follows", False)), None)


class Responders(Component):
    """The run's follower (at most one is needed: every ``br:current`` bot reads the same table)."""

    name = "respond"
    folder = "responders"
    section = RespondConfig
    section_default = RespondConfig
    section_doc = "Bots that respond to the trainable policy as it is now (arena/loop/components/respond.py)."
    renamed = {"respond_every": "every"}

    def __init__(self, cfg: Any, follower: Any, env: Any, policies: Mapping[str, Any], sampling: Any):
        self.cfg, self.follower, self.env, self.policies, self.sampling = cfg, follower, env, policies, sampling
        self.fresh = False  # a table exists for this run (set by follow or load)

    @classmethod
    def build(cls, plan: Any, parts: Any) -> Responders | None:
        follower = find_follower(plan.cfg, parts.runner.policies)
        return cls(plan.cfg, follower, parts.probe_env, parts.runner.policies, parts.runner.sampling) if follower else None

    def due(self, step: int) -> bool:
        return not self.fresh or (step - 1) % self.cfg.train.respond.every == 0

    def before_play(self, step: int) -> dict[str, float]:
        """Recompute the follower's table when due; ``time/respond_s`` (0 when not due)."""
        if not self.due(step):
            return {"time/respond_s": 0.0}
        from arena.loop.exact import current_policy

        t0 = time.perf_counter()
        with current_policy(self.cfg, self.env, self.policies, self.sampling) as probs:
            self.follower.follow(self.env, probs)
        self.fresh = True
        return {"time/respond_s": time.perf_counter() - t0}

    def writer(self) -> Any:
        return self.save

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / FILE).write_text(json.dumps(self.follower.followed()))

    def load(self, checkpoint: Path, step: int = 0) -> None:
        """The checkpoint's tables; a checkpoint without them (written before the follower existed) leaves
        the next step to recompute."""
        path = checkpoint / "responders" / FILE
        if path.is_file():
            self.follower.restore(json.loads(path.read_text()))
            self.fresh = True
