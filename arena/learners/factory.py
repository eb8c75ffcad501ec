"""A trainable policy's learner, made from its resolved config: the AUSO length cap, a named adapter on a
shared base, the Learner itself, the adapter's base name and the estimators' states (the loop hands in the
model, the tokenizer and the KL reference; arena/loop/build.py)."""

from __future__ import annotations

from typing import Any

from arena.learners.config import LearnerConfig


def make_learner(model: Any, tokenizer: Any, cfg: LearnerConfig, temperature: float, ref: Any, dist: Any,
                 max_new_tokens: int, adapter: str | None = None, adapters: dict[int, Any] | None = None,
                 base_name: str | None = None) -> tuple[Any, Any]:
    """``(Learner, EstimatorStates)``. ``max_new_tokens``: the policy's largest token budget (AUSO's length cap
    ``auto``); ``adapter``: train a named adapter on ``model``, a base shared with other policies (their
    ``adapters`` by base); ``base_name``: the base a saved LoRA adapter names."""
    from arena.learners.auso import resolve_length_cap
    from arena.learners.estimators import EstimatorStates
    from arena.learners.update import Learner

    cfg = resolve_length_cap(cfg, max_new_tokens)
    if adapter is not None and cfg.lora is not None:
        from arena.learners.adapters import policy_adapter

        model = policy_adapter(model, adapter, cfg.lora, adapters if adapters is not None else {})
    learner = Learner(model, cfg, tokenizer.pad_token_id, temperature, ref, dist)
    if cfg.lora is not None and base_name is not None:  # checkpoints hold the adapter; it loads over this base
        from arena.learners.lora import set_base_name

        set_base_name(learner.module, base_name)
    return learner, EstimatorStates(cfg.estimators)
