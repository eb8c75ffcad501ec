"""The game's state across episodes (a skill library, an opponent pool): updated after each step from
that step's episodes, saved with every checkpoint as readable files in ``game_state/``."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from arena.loop.component import Component, StepContext


class GameStateUpdate(Component):
    """``GameState.update`` after each step (inside the sync guard: the next games see the new state)."""

    name = "game_state"

    def __init__(self, state: Any, policies: dict[str, Any]):
        self.state, self.policies = state, policies

    @classmethod
    def build(cls, plan: Any, parts: Any) -> GameStateUpdate | None:
        return cls(parts.state, parts.policies) if parts.state is not None else None

    def after_step(self, ctx: StepContext) -> dict[str, float]:
        from arena.runner import generate_texts

        generators = {name: partial(generate_texts, policy) for name, policy in self.policies.items()}
        return {f"state/{k}": v for k, v in self.state.update(ctx.episodes, generators).items()}

    def writer(self) -> Any:
        return self.state.save

    def load(self, checkpoint: Path, step: int) -> None:
        self.state.load(checkpoint / "game_state")
