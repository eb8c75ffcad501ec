"""Assembly: the one place that turns a validated config into policies, a runner and game state.

``policies/`` knows nothing of configs and ``learners/`` owns no training loop;
this module reads :class:`~arena.loop.config.ArenaConfig` and builds the parts the
CLIs (train, play, eval, tournament) share:

* :func:`build_policies`: the policy table, restricted to the names a run
  uses. Scripted bots are checked first, so a typo fails before a model loads.
  Frozen transformers models are loaded once per (model, dtype, device) in a
  :class:`ModelStore`; the same object serves every seat that uses it and,
  through :func:`reference_model`, the learner's KL reference.
* :func:`sampling_table`: (policy, phase) -> sampling settings.
* :func:`build_runner`: the batched runner with the seat map, sampling and the
  game's cross-episode state.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from arena.core.errors import ConfigError
from arena.core.game import GameState
from arena.runner import Runner, SamplingFn, SeatMap
from arena.policies.base import Policy, SamplingParams
from arena.policies.config import HumanSpec, ModelPolicySpec, RewardModelSpec, ScriptedSpec, shorthand_policy

if TYPE_CHECKING:  # annotations only: the config imports the parts' models, not this assembly
    from arena.loop.config import ArenaConfig


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


def used_policies(cfg: ArenaConfig, seats: Iterable[str] = ()) -> list[str]:
    """Policy names the seat table (and ``seats`` of extra seat maps) name, plus the trainable one."""
    names = list(dict.fromkeys([*cfg.seat_table().values(), *seats]))
    if cfg.trainable and cfg.trainable not in names:
        names.append(cfg.trainable)
    return names


def build_policies(
    cfg: ArenaConfig, names: Iterable[str] | None = None, store: ModelStore | None = None,
    share: Mapping[str, str] | None = None, played_only: bool = False, **hf_kwargs: Any
) -> dict[str, Policy]:
    """Policies by name for ``names`` (default: those the config uses). ``share``: trainable policy -> the
    name of its group of LoRA policies over one base (:func:`arena.loop.assemble.shared_bases`); a group's
    hf policies all run on the model its first built one loads. Frozen vLLM policies over one base, some of
    them adapters, share one engine (:func:`frozen_adapter_engines`); ``played_only`` (evaluation: nothing
    trains) counts every policy as frozen."""
    names = list(names) if names is not None else used_policies(cfg)
    store = store or ModelStore()
    specs = {}
    for name in names:
        try:
            specs[name] = cfg.policy_spec(name)
        except KeyError:
            raise ConfigError(f"seats: unknown policy {name!r}; known: {', '.join(cfg.policies)}") from None
    if any(isinstance(s, ModelPolicySpec) and s.backend == "vllm" for s in specs.values()):
        from arena.policies.hardware import set_vllm_cpu_bind

        # A vLLM-cpu engine in a process of its own that generates while the learner updates gets the
        # cores the learner leaves (VLLM_CPU_OMP_THREADS_BIND; a user's setting wins).
        set_vllm_cpu_bind(overlapped=bool(cfg.train.async_ and cfg.train.async_.max_staleness))
    share = share or {}
    bases: dict[str, Any] = {}  # a shared base's group -> its first built policy
    policies: dict[str, Policy] = {}
    for name, spec in specs.items():  # bots first: a typo fails before any model loads
        if isinstance(spec, ScriptedSpec):
            policies[name] = scripted_policy(cfg, spec, name, field=f"policies.{name}.bot")
    engines = frozen_adapter_engines({n: s for n, s in specs.items() if n not in share}, played_only)
    for name, spec in specs.items():
        if isinstance(spec, HumanSpec):
            from arena.policies.human import HumanPolicy

            policies[name] = HumanPolicy()
        elif isinstance(spec, RewardModelSpec):
            from arena.policies.reward_model import RewardModelPolicy

            from arena.policies.hardware import resolve_dtype

            policies[name] = RewardModelPolicy(
                spec.model, dtype=resolve_dtype(spec.dtype, spec.device), device=spec.device, max_batch_size=spec.max_batch_size,
                max_length=spec.max_length, label_index=spec.label_index, name=name,
            )
        elif isinstance(spec, ModelPolicySpec):
            # A LoRA learner hands a vLLM generator its adapter alone: the engine must reserve the rank.
            lora = cfg.learner.lora.r if cfg.learner.lora is not None and spec.trainable else None
            base = bases.get(share[name]) if name in share else None
            if name in engines:
                policies[name] = engine_policy(spec, name, engines[name])
                continue
            policies[name] = make_model_policy(spec, name, store, lora_rank=lora, base=base, **hf_kwargs)
            if name in share:
                bases.setdefault(share[name], policies[name])
    return policies


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
        enable_sleep_mode=first.enable_sleep_mode, kv_cache_gb=max(s.kv_cache_gb for s in specs),
        lora_rank=lora_rank, max_loras=max_loras,
    )


def engine_policy(spec: ModelPolicySpec, name: str, engine: Any) -> Policy:
    """Policy ``name`` served on a shared vLLM ``engine``: its own adapter (an adapter folder) or the base."""
    from arena.policies.vllm import VLLMPolicy

    return VLLMPolicy(spec.model, name=name, seeded=spec.seeded_sampling, overflow=spec.overflow, engine=engine)


def scripted_policy(cfg: ArenaConfig, spec: ScriptedSpec, name: str, field: str) -> Policy:
    """The game's scripted bot ``spec.bot``; an unknown bot is a one-line error naming ``field``."""
    from arena.policies.scripted import ScriptedPolicy, make_bot

    try:
        return ScriptedPolicy(make_bot(cfg.game.cls, spec.bot), name=name)
    except ValueError as e:
        raise ConfigError(f"{field}: {e}") from None


def league_policy(cfg: ArenaConfig, spec: ModelPolicySpec | str, name: str) -> Policy:
    """A league member's policy: a checkpoint's model spec, or a ``scripted:<bot>`` (``train.league.bots``)."""
    if isinstance(spec, str):
        bot = shorthand_policy(spec)
        if not isinstance(bot, ScriptedSpec):
            raise ConfigError(f"train.league.bots: {spec!r} is not a scripted opponent; write scripted:<bot>")
        return scripted_policy(cfg, bot, name, field="train.league.bots")
    return make_model_policy(spec, name, ModelStore())


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
            seeded=spec.seeded_sampling, overflow=spec.overflow, lora_rank=lora_rank,
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


def sampling_table(cfg: ArenaConfig) -> SamplingFn:
    """(policy name, phase) -> the policy's sampling with that phase's overrides."""
    specs = {n: s for n, s in cfg.policies.items() if isinstance(s, ModelPolicySpec)}
    cache: dict[tuple[str, str], SamplingParams] = {}

    def params(policy: str, phase: str) -> SamplingParams:
        if (policy, phase) not in cache:
            spec = specs.get(policy)
            cache[(policy, phase)] = spec.params_for(phase) if spec is not None else SamplingParams()
        return cache[(policy, phase)]

    return params


def reference_model(
    cfg: ArenaConfig, policies: dict[str, Policy], store: ModelStore, device: str, name: str | None = None
) -> Any:
    """The frozen KL reference of trainable policy ``name`` (default: the first): a named policy's model,
    a frozen seat model on the trainable model (``auto``), or else a float32 copy of its initial weights
    (one copy per base model, shared by every trainable policy on that base)."""
    from arena.core.models import resolve_model

    name = name or cfg.trainable
    choice = cfg.learner_for(name).reference  # type: ignore[arg-type]
    trainable = cfg.policies[name]  # type: ignore[index]
    if choice != "auto":
        spec = cfg.policies.get(choice)
        if not isinstance(spec, ModelPolicySpec) or spec.trainable or spec.backend != "hf":
            raise ConfigError(f"learner.reference: {choice!r} is not a frozen hf model policy; use 'auto' or one of "
                              f"{', '.join(n for n, s in cfg.policies.items() if isinstance(s, ModelPolicySpec) and not s.trainable and s.backend == 'hf') or '(none)'}")
        return store.get(spec.model, spec.resolved_dtype, spec.device)[0]
    target = resolve_model(trainable.model)
    for other, spec in cfg.policies.items():
        if (isinstance(spec, ModelPolicySpec) and not spec.trainable and spec.backend == "hf"
                and other in policies and resolve_model(spec.model) == target):
            return store.get(spec.model, spec.resolved_dtype, spec.device)[0]
    return store.get(trainable.model, "float32", device)[0]


def build_runner(
    cfg: ArenaConfig,
    policies: dict[str, Policy],
    state: GameState | None = None,
    num_envs: int | None = None,
    progress: bool | None = None,
) -> Runner:
    return Runner(
        cfg.game.make_env, policies, SeatMap(cfg.seat_table()), sampling_table(cfg),
        num_envs=num_envs or cfg.runner.num_envs,
        progress=cfg.runner.progress if progress is None else progress,
        state=state,
    )
