"""Build the policies a config's seat map names, checking everything before loading a model."""

from __future__ import annotations

from typing import Any

from arena.config import ArenaConfig, ConfigError
from arena.registry import game_class
from arena.runner import SeatMap
from policies.base import Policy, SamplingParams


def build_policies(cfg: ArenaConfig, **hf_kwargs: Any) -> tuple[dict[str, Policy], SeatMap, dict[str, SamplingParams]]:
    """(policies by name, seat map, sampling by policy) for ``cfg.seats``.

    Scripted bot names are checked first, so a typo fails before any model loads.
    ``trainable`` and ``reference`` load the same model as separate weights: the
    reference stays frozen.
    """
    from policies.scripted import ScriptedPolicy, make_bot

    game_cls = game_class(cfg.game.name)
    seat_map = SeatMap(dict(cfg.seats))
    for seat in cfg.game.make_env().possible_agents:
        try:
            seat_map.policy_for(seat)
        except KeyError as e:
            raise ConfigError(f"seats: {e.args[0]}") from None
    names = sorted(set(cfg.seats.values()))
    policies: dict[str, Policy] = {}
    for name in names:
        if name.startswith("scripted:"):
            try:
                policies[name] = ScriptedPolicy(make_bot(game_cls, name.split(":", 1)[1]), name=name)
            except ValueError as e:
                raise ConfigError(f"seats: {e}") from None
    for name in names:
        if name == "human":
            from policies.human import HumanPolicy

            policies[name] = HumanPolicy()
        elif name in ("trainable", "reference"):
            policies[name] = make_model_policy(cfg, name, **hf_kwargs)
    sampling = {name: cfg.policy.sampling() for name in ("trainable", "reference")}
    return policies, seat_map, sampling


def make_model_policy(cfg: ArenaConfig, name: str, **kwargs: Any) -> Policy:
    """The configured generation backend for one model-backed policy."""
    p = cfg.policy
    if p.backend == "hf":
        from policies.hf import HFPolicy

        return HFPolicy(
            p.model, dtype=p.dtype, device=p.device, max_batch_size=p.max_batch_size,
            max_batch_tokens=p.max_batch_tokens, name=name, **kwargs,
        )
    if p.backend == "vllm":
        from policies.vllm import VLLMPolicy

        return VLLMPolicy(
            p.model, dtype=p.dtype, max_model_len=p.max_model_len, gpu_memory_utilization=p.gpu_memory_utilization,
            tensor_parallel_size=p.tensor_parallel_size, enable_sleep_mode=p.enable_sleep_mode, name=name,
            kv_cache_gb=p.kv_cache_gb, seeded=p.seeded_sampling,
        )
    import os

    from policies.openai import OpenAIPolicy

    assert p.base_url is not None  # checked by PolicySection
    key = os.environ.get(p.api_key_env) if p.api_key_env else None
    return OpenAIPolicy(
        p.base_url, p.model, api=p.api, api_key=key, timeout_s=p.timeout_s, retries=p.retries, name=name
    )
