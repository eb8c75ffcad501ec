"""Policies from their specs: one backend object per policy of a config's table.

The loop (arena/loop/build.py) decides which policies a run needs and what they share; this module
makes each one from its :mod:`arena.policies.config` spec, importing a backend only when a spec
selects it (hf, vllm, openai, a reward model, a person, a scripted bot):

* :class:`ModelStore`: frozen transformers models loaded once per (resolved model, dtype, device) and
  shared by every seat that uses them (and by the learner's KL reference);
* :func:`make_policy`: any spec; :func:`make_model_policy`: a model spec's generation backend;
* :func:`frozen_adapter_engines`, :func:`group_engine`, :func:`engine_policy`: frozen vLLM policies
  over one base, some of them LoRA adapters, served by one engine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arena.core.errors import ConfigError
from arena.policies.base import Policy
from arena.policies.config import HumanSpec, ModelPolicySpec, RewardModelSpec, ScriptedSpec


@dataclass
class ModelStore:
    """Transformers models loaded once per (resolved model, dtype, device) and shared."""

    models: dict[tuple[str, str, str], tuple[Any, Any]] = field(default_factory=dict)
    # Trainable policies' shared base (learner.lora.shared_base): its peft model of named adapters, by id(base).
    adapters: dict[int, Any] = field(default_factory=dict)

    def get(self, name: str, dtype: str, device: str) -> tuple[Any, Any]:
        from arena.core.models import load_causal_lm, resolve_model

        key = (resolve_model(name), dtype, device)
        if key not in self.models:
            model, tokenizer = load_causal_lm(name, dtype=dtype, device=device)
            model.requires_grad_(False)
            self.models[key] = (model, tokenizer)
        return self.models[key]


def frozen_adapter_engines(specs: Mapping[str, Any], played_only: bool = False) -> dict[str, Any]:
    """One vLLM engine for the frozen vLLM policies over one base when any of them is a LoRA adapter (an
    adapter checkpoint: a tournament's or ``arena.eval``'s players): policy -> its engine. ``played_only``:
    trainable policies count too (nothing trains).
    Policies group by (base model, dtype); a group needs two members or more, one an adapter. The engine
    takes the group's first member's settings, the largest context and KV cache, LoRA of the largest
    adapter rank and a slot per adapter; each policy then serves its own adapter (or the base) on it, and
    the runner asks them in one generate call a tick (arena/policies/vllm.py)."""
    from arena.core.models import resolve_model
    from arena.policies.vllm import adapter_info

    groups: dict[tuple[str, str], list[tuple[str, ModelPolicySpec, tuple[str, int] | None]]] = {}
    for name, spec in specs.items():
        if isinstance(spec, ModelPolicySpec) and spec.backend == "vllm" and (played_only or not spec.trainable):
            model = resolve_model(spec.model)
            fixed = adapter_info(model)
            base = resolve_model(fixed[0]) if fixed is not None else model
            groups.setdefault((base, spec.resolved_dtype), []).append((name, spec, fixed))
    out: dict[str, Any] = {}
    for members in groups.values():
        ranks = [fixed[1] for _, _, fixed in members if fixed is not None]
        if len(members) < 2 or not ranks:
            continue
        engine = group_engine(base, [spec for _, spec, _ in members], max(ranks), len(ranks))
        out |= {name: engine for name, _, _ in members}
    return out


def group_engine(model: str, specs: Sequence[ModelPolicySpec], lora_rank: int | None, max_loras: int) -> Any:
    """One vLLM engine over ``model`` for a group of policies: the first one's settings and dtype, the group's
    largest context and KV cache, LoRA of ``lora_rank`` with ``max_loras`` adapter slots."""
    from arena.policies.vllm import VLLMEngine

    first = specs[0]
    return VLLMEngine(
        model, dtype=first.resolved_dtype, max_model_len=max(s.max_model_len or 2048 for s in specs),
        gpu_memory_utilization=first.gpu_memory_utilization, tensor_parallel_size=first.tensor_parallel_size,
        enable_sleep_mode=first.enable_sleep_mode, kv_cache_gb=largest_kv_cache(specs),
        lora_rank=lora_rank, max_loras=max_loras, max_num_seqs=max((s.max_num_seqs or 0 for s in specs), default=0) or None,
    )


def largest_kv_cache(specs: Sequence[ModelPolicySpec]) -> float | str:
    """The KV cache of an engine several policies share: the largest of the fixed budgets given, else ``auto``."""
    fixed = [s.kv_cache_gb for s in specs if s.kv_cache_gb != "auto"]
    return max(float(x) for x in fixed) if fixed else "auto"


def engine_policy(spec: ModelPolicySpec, name: str, engine: Any) -> Policy:
    """Policy ``name`` served on a shared vLLM ``engine``: its own adapter (an adapter folder) or the base."""
    from arena.policies.vllm import VLLMPolicy

    return VLLMPolicy(spec.model, name=name, seeded=spec.seeded_sampling, overflow=spec.overflow, engine=engine)


def make_model_policy(
    spec: ModelPolicySpec, name: str, store: ModelStore, lora_rank: int | None = None, base: Any = None, **kwargs: Any
) -> Policy:
    """The configured generation backend for one model policy. ``lora_rank``: a vLLM engine that will
    be handed LoRA adapters of this rank (the trainable policy of a ``learner.lora`` run). ``base``: an
    hf policy whose model and tokenizer this one runs on (adapters on a shared base)."""
    if spec.backend == "hf":
        from arena.policies.hf import HFPolicy

        model: Any = spec.model
        tokenizer = None
        if base is not None:
            model, tokenizer = base.model, base.tokenizer
        elif not spec.trainable:  # frozen weights: one shared copy per (model, dtype, device)
            model, tokenizer = store.get(spec.model, spec.resolved_dtype, spec.device)
        return HFPolicy(
            model, tokenizer=tokenizer, dtype=spec.resolved_dtype, device=spec.device, max_batch_size=spec.max_batch_size,
            max_batch_tokens=spec.max_batch_tokens, name=name, max_model_len=spec.max_model_len,
            overflow=spec.overflow, prefix_sharing=spec.prefix_sharing, reuse_prefix=True, **kwargs,
        )
    if spec.backend == "vllm":
        from arena.policies.vllm import VLLMPolicy

        return VLLMPolicy(
            spec.model, dtype=spec.resolved_dtype, max_model_len=spec.max_model_len or 2048,
            gpu_memory_utilization=spec.gpu_memory_utilization, tensor_parallel_size=spec.tensor_parallel_size,
            enable_sleep_mode=spec.enable_sleep_mode, name=name, kv_cache_gb=spec.kv_cache_gb,
            seeded=spec.seeded_sampling, overflow=spec.overflow, lora_rank=lora_rank, max_num_seqs=spec.max_num_seqs,
        )
    from arena.policies.openai import OpenAIPolicy

    if spec.base_url is None:  # the spec's validator already requires it
        raise ConfigError(f"policies.{name}.base_url: backend 'openai' needs base_url")
    key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    return OpenAIPolicy(
        spec.base_url, spec.model, api=spec.api, api_key=key, timeout_s=spec.timeout_s, retries=spec.retries,
        backoff_s=spec.backoff_s, name=name, max_model_len=spec.max_model_len, overflow=spec.overflow,
        weights_dir=(spec.weights_dir or "") if spec.sync_weights else None,  # "": a fresh folder
        nccl_address=spec.nccl_address if spec.weights_transport == "nccl" else None,
    )


def scripted_policy(game_cls: type, spec: ScriptedSpec, name: str, field: str) -> Policy:
    """The game's scripted bot ``spec.bot``; an unknown bot is a one-line error naming ``field``."""
    from arena.policies.scripted import ScriptedPolicy, make_bot

    try:
        return ScriptedPolicy(make_bot(game_cls, spec.bot), name=name)
    except ValueError as e:
        raise ConfigError(f"{field}: {e}") from None


def make_policy(spec: Any, name: str, store: ModelStore, game_cls: type, lora_rank: int | None = None,
                base: Any = None, **kwargs: Any) -> Policy:
    """Policy ``name`` from any spec of the table: a person, a reward model, a scripted bot, or a model
    (:func:`make_model_policy`)."""
    if isinstance(spec, ScriptedSpec):
        return scripted_policy(game_cls, spec, name, field=f"policies.{name}.bot")
    if isinstance(spec, HumanSpec):
        from arena.policies.human import HumanPolicy

        return HumanPolicy()
    if isinstance(spec, RewardModelSpec):
        from arena.policies.hardware import resolve_dtype
        from arena.policies.reward_model import RewardModelPolicy

        return RewardModelPolicy(
            spec.model, dtype=resolve_dtype(spec.dtype, spec.device), device=spec.device, max_batch_size=spec.max_batch_size,
            max_length=spec.max_length, label_index=spec.label_index, name=name,
        )
    return make_model_policy(spec, name, store, lora_rank=lora_rank, base=base, **kwargs)


def policy_table(specs: Mapping[str, Any], store: ModelStore, game_cls: type, *, share: Mapping[str, str] | None = None,
                 groups: Mapping[str, Sequence[str]] | None = None, lora_ranks: Mapping[str, int] | None = None,
                 extra_loras: int = 0, played_only: bool = False, overlapped: bool = False, **hf_kwargs: Any
                 ) -> dict[str, Policy]:
    """Every policy of ``specs`` (name -> spec), in their order. Scripted bots are made first, so a typo fails
    before a model loads. ``share``: policy -> its group of LoRA policies over one base (their hf policies run
    on the model the group's first built one loads); ``groups``: group -> its policies served by one vLLM
    engine each with its own adapter (``extra_loras`` more slots: the league's members); ``lora_ranks``: the
    adapter rank of each LoRA learner's generator; frozen vLLM policies over one base, some of them adapters,
    share one engine (:func:`frozen_adapter_engines`; ``played_only``: every policy counts as frozen).
    ``overlapped``: a vLLM-cpu engine generates while the learner updates (its cores, arena/policies/hardware.py)."""
    if any(isinstance(s, ModelPolicySpec) and s.backend == "vllm" for s in specs.values()):
        from arena.policies.hardware import set_vllm_cpu_bind

        set_vllm_cpu_bind(overlapped=overlapped)
    share, groups, lora_ranks = share or {}, groups or {}, lora_ranks or {}
    served = {n for members in groups.values() for n in members}
    bases: dict[str, Any] = {}  # a shared base's group -> its first built policy
    policies: dict[str, Policy] = {}
    for members in groups.values():
        policies |= group_policies({n: specs[n] for n in members}, [lora_ranks[n] for n in members], extra_loras)
    engines = frozen_adapter_engines({n: s for n, s in specs.items() if n not in share and n not in served}, played_only)
    ordered = sorted((n for n in specs if n not in served), key=lambda n: not isinstance(specs[n], ScriptedSpec))
    for name in ordered:
        spec = specs[name]
        if name in engines:
            policies[name] = engine_policy(spec, name, engines[name])
            continue
        policies[name] = make_policy(spec, name, store, game_cls, lora_rank=lora_ranks.get(name),
                                     base=bases.get(share[name]) if name in share else None, **hf_kwargs)
        if name in share:
            bases.setdefault(share[name], policies[name])
    return {name: policies[name] for name in specs}


def group_policies(specs: Mapping[str, ModelPolicySpec], ranks: Sequence[int], extra_loras: int = 0) -> dict[str, Policy]:
    """One vLLM engine for a group of LoRA policies over one base, and one policy per member on it, each with
    its own adapter (from the first update on; the base until then). The engine takes its first member's
    settings, the largest context and KV cache, LoRA of the largest rank, and a slot per member plus
    ``extra_loras``."""
    from arena.core.models import resolve_model
    from arena.policies.vllm import adapter_info

    first = next(iter(specs.values()))
    fixed = adapter_info(resolve_model(first.model))  # a policy that starts from an adapter: its base
    engine = group_engine(fixed[0] if fixed else first.model, list(specs.values()),
                          max([*ranks, fixed[1]] if fixed else ranks), len(specs) + extra_loras)
    return {name: engine_policy(spec, name, engine) for name, spec in specs.items()}
