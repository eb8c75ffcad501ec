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
from arena.loop.plan import Plan, portable_model_name, resolve, used_policies
from arena.policies.base import Policy, SamplingParams
from arena.policies.config import ModelPolicySpec, ScriptedSpec
from arena.policies.factory import (  # noqa: F401 - re-exported: their home was here
    ModelStore, engine_policy, frozen_adapter_engines, group_engine, make_model_policy, make_policy, policy_table,
)
from arena.runner import Runner, SamplingFn, SeatMap

if TYPE_CHECKING:  # annotations only: the config imports the parts' models, not this assembly
    from arena.loop.config import ArenaConfig


def build_policies(
    cfg: ArenaConfig, names: Iterable[str] | None = None, store: ModelStore | None = None,
    share: Mapping[str, str] | None = None, played_only: bool = False, **hf_kwargs: Any
) -> dict[str, Policy]:
    """Policies by name for ``names`` (default: those the config uses), through
    :func:`arena.policies.factory.policy_table` (bots first; frozen vLLM adapters over one base share an engine;
    ``played_only``, evaluation: every policy counts as frozen). ``share``: trainable policy -> its group of
    LoRA policies over one base (:func:`arena.loop.plan.shared_bases`)."""
    names = list(names) if names is not None else used_policies(cfg)
    specs = {}
    for name in names:
        try:
            specs[name] = cfg.policy_spec(name)
        except KeyError:
            raise ConfigError(f"seats: unknown policy {name!r}; known: {', '.join(cfg.policies)}") from None
    lora = cfg.learner.lora.r if cfg.learner.lora is not None else None
    ranks = {n: lora for n, s in specs.items() if lora is not None and isinstance(s, ModelPolicySpec) and s.trainable}
    return policy_table(specs, store or ModelStore(), cfg.game.cls, share=share, lora_ranks=ranks, played_only=played_only,
                        overlapped=bool(cfg.train.async_ and cfg.train.async_.max_staleness), **hf_kwargs)


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
    sampling = sampling_table(cfg)
    seats = SeatMap(cfg.seat_table())
    return Runner(
        cfg.game.make_env, policies, seats, sampling,
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
    components (each decides from the plan whether the run uses it)."""
    from arena.learners.schedule import make_schedule
    from arena.loop.component import Components, Parts
    from arena.loop.components import COMPONENTS

    plan = plan if plan is not None else resolve(cfg, run_dir, resume, dist)
    store = ModelStore()
    ranks = {n: lc.lora.r for n, lc in plan.learners.items() if lc.lora is not None}
    policies = policy_table({n: cfg.policy_spec(n) for n in plan.names}, store, cfg.game.cls, share=plan.share,
                            groups=plan.engines, lora_ranks=ranks, extra_loras=plan.extra_loras,
                            overlapped=bool(plan.staleness))
    bases: dict[tuple[str, str, str], Any] = {}  # the learners' shared bases (vLLM groups)
    trained = [build_trained(plan, name, policies, store, bases) for name in cfg.trainables]
    env = cfg.game.make_env()
    state = env.make_state()
    runner = build_runner(cfg, policies, state=state)
    phases = list(dict.fromkeys(p for t in trained for p in t.learner.cfg.estimators))
    schedule = make_schedule(cfg.train.schedule, phases)
    run_dir.mkdir(parents=True, exist_ok=True)
    parts = Parts(policies=policies, trained=trained, runner=runner, probe_env=env, state=state,
                  sampling=runner.sampling, run_dir=run_dir, dist=dist, resume=resume)
    built = [c.build(plan, parts) for c in COMPONENTS]
    return Built(policies=policies, trained=trained, schedule=schedule, probe_env=env,
                 runner=runner, components=Components([c for c in built if c is not None]))


def build_trained(plan: Plan, name: str, policies: dict[str, Any], store: Any,
                  bases: dict[tuple[str, str, str], Any] | None = None) -> Trained:
    """Trainable policy ``name``: its learner (arena/learners/factory.py), estimator states and adapter sync. An hf
    generator on the learner's device whose dtype is the learner's weights' shares the learner's model: nothing
    to sync (with bf16 weights the fp32 master starts from the generator's bf16 copy). With async rollouts the
    generator plays while the learner updates: it needs its own copy. A policy whose base is shared (in
    ``plan.share``) trains its own named adapter on it; with vLLM generators the group's learners load that base
    once (``bases``: (model, device, weights' dtype) -> model and tokenizer)."""
    from arena.core.models import load_causal_lm, resolve_model
    from arena.learners.factory import make_learner

    generator, lc = policies[name], plan.learners[name]
    spec: ModelPolicySpec = plan.cfg.policies[name]  # type: ignore[assignment]
    adapter_sync = None
    if lc.lora is not None and hasattr(generator, "load_adapter"):  # vLLM: the adapter alone, a fresh version each update
        adapter_sync = AdapterFolders(plan.run_dir / (".adapter_sync" if name == plan.cfg.trainable else f".adapter_sync/{name}"))
    ref = reference_model(plan.cfg, policies, store, lc.device, name) if lc.beta > 0 else None
    if (spec.resolved_dtype == lc.param_dtype and spec.backend == "hf" and spec.device == lc.device
            and not plan.staleness):
        model, tokenizer = generator.model, generator.tokenizer
    else:
        key = (resolve_model(spec.model), lc.device, lc.param_dtype)
        if name not in plan.share or bases is None or key not in bases:
            loaded = load_causal_lm(spec.model, dtype="float32", device=lc.device)
            if name in plan.share and bases is not None:
                bases[key] = loaded
        model, tokenizer = bases[key] if name in plan.share and bases is not None else loaded
    caps = [spec.sampling.max_new_tokens] + [o.max_new_tokens for o in spec.phase_sampling.values() if o.max_new_tokens]
    learner, states = make_learner(model, tokenizer, lc, spec.sampling.temperature, ref, plan.dist, max(caps),
                                   adapter=name if name in plan.share else None, adapters=store.adapters,
                                   base_name=plan.base_names.get(name))
    if lc.lora is not None and adapter_sync is None and hasattr(learner.module, "activate"):
        generator.adapter = learner.module.activate  # an hf shared base: the generator runs this policy's adapter
    return Trained(name=name, generator=generator, tokenizer=tokenizer, learner=learner, adapter_sync=adapter_sync,
                   estimator_states=states)


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
