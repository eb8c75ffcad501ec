"""The progress bar of ``runner.progress``: one tick a step, the game's headline metrics and the KL."""

from __future__ import annotations

from typing import Any

from arena.loop.component import Component, StepContext


class ProgressBar(Component):
    """A tqdm bar over the run's steps (opened after the warm start and the step-0 evaluations)."""

    name = "progress"

    def __init__(self, shown: list[str]):
        self.shown = shown
        self.bar: Any = None

    @classmethod
    def build(cls, plan: Any, parts: Any) -> ProgressBar | None:
        if not plan.cfg.runner.progress:
            return None
        return cls([f"game/{k}" for k in plan.cfg.game.cls.headline_metrics] + ["kl"])

    def start(self, loop: Any) -> dict[str, float]:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=loop.last_step, initial=loop.step, desc="train", unit="step")
        return {}

    def logged(self, ctx: StepContext, row: dict[str, Any]) -> None:
        if self.bar is not None and ctx.step:
            self.bar.update(1)
            self.bar.set_postfix({k.split("/")[-1]: f"{row[k]:.3f}" for k in self.shown if isinstance(row.get(k), float)})

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
