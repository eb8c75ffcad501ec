"""Which phases are trained at each step: SpyRL alternates performing and detection.

* ``hysteresis`` (paper): start on detection; keep EMAs of detection accuracy
  ``acc`` and N/A rate ``na``; switch detection -> performing when
  ``acc >= 0.9 and na <= 0.1``, performing -> detection when ``1 - acc >= 0.4``
  or ``na >= 0.5``; at least ``min_steps`` updates per stage.
* ``fixed`` (public code): alternate every ``every`` steps.
* ``joint``: both phases every step (the paper's collapsing ablation).

The schedule is training state: it goes in checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from learners.config import ScheduleConfig


class PhaseSchedule:
    def __init__(self, cfg: ScheduleConfig):
        self.cfg = cfg
        self.stage = cfg.detect_phase
        self.steps_in_stage = 0
        self.acc: float | None = None
        self.na: float | None = None

    def phases(self) -> list[str]:
        if self.cfg.mode == "joint":
            return [self.cfg.perform_phase, self.cfg.detect_phase]
        return [self.stage]

    def update(self, metrics: Mapping[str, float]) -> None:
        """Advance after a step, given that step's mean episode metrics."""
        cfg = self.cfg
        self.steps_in_stage += 1
        if "detection_accuracy" in metrics:
            self.acc = self._ema(self.acc, metrics["detection_accuracy"])
        if "na_rate" in metrics:
            self.na = self._ema(self.na, metrics["na_rate"])
        if cfg.mode == "fixed" and self.steps_in_stage >= cfg.every:
            self._switch()
        elif cfg.mode == "hysteresis" and self.steps_in_stage >= cfg.min_steps and self.acc is not None:
            na = self.na or 0.0
            if self.stage == cfg.detect_phase and self.acc >= cfg.to_perform_acc and na <= cfg.to_perform_na:
                self._switch()
            elif self.stage == cfg.perform_phase and (1 - self.acc >= cfg.to_detect_err or na >= cfg.to_detect_na):
                self._switch()

    def _ema(self, old: float | None, new: float) -> float:
        return new if old is None else self.cfg.ema * old + (1 - self.cfg.ema) * new

    def _switch(self) -> None:
        cfg = self.cfg
        self.stage = cfg.perform_phase if self.stage == cfg.detect_phase else cfg.detect_phase
        self.steps_in_stage = 0

    def state_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "steps_in_stage": self.steps_in_stage, "acc": self.acc, "na": self.na}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stage = state["stage"]
        self.steps_in_stage = int(state["steps_in_stage"])
        self.acc, self.na = state["acc"], state["na"]
