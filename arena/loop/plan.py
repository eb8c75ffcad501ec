"""The plan: a validated config resolved once into what the run will build, before any model loads.

Assembly has two phases. :func:`resolve` reads the :class:`~arena.loop.config.ArenaConfig` once: the
policies the run uses, each trainable policy's learner with its precision made concrete, which LoRA
policies share a base and which vLLM engines serve several of them, the async staleness, and every
start-up check that needs no weights (a trainable policy with a seat, what several trainable
policies support, each component's ``prepare``). The result is a frozen :class:`Plan`. Then
:func:`arena.loop.build.build_trainer` makes the objects from the plan, and nothing after it reads
the config to decide how to build.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.core.distributed import SINGLE, Dist
from arena.core.errors import ConfigError
from arena.loop.config import ArenaConfig
from arena.policies.config import ModelPolicySpec


def used_policies(cfg: ArenaConfig, seats: Any = ()) -> list[str]:
    """Policy names the seat table (and ``seats`` of extra seat maps) name, plus the trainable one."""
    names = list(dict.fromkeys([*cfg.seat_table().values(), *seats]))
    if cfg.trainable and cfg.trainable not in names:
        names.append(cfg.trainable)
    return names


@dataclass(frozen=True)
class Plan:
    """A training run, resolved: the config and what the build needs from it (module docstring)."""

    cfg: ArenaConfig
    run_dir: Path
    resume: Path | None
    dist: Dist
    names: tuple[str, ...]  # the policies the run builds: the seat table's and the trainable ones
    learners: Mapping[str, Any]  # trainable policy -> its learner section, precision resolved
    share: Mapping[str, str]  # LoRA policy -> its group of policies over one base (shared_bases)
    engines: Mapping[str, list[str]]  # group -> its policies served on one vLLM engine
    extra_loras: int  # adapter slots for the league's members on the trainable policy's engine
    adapter_league: bool  # the league's members are adapters on that engine
    staleness: int  # train.async's max_staleness; 0: synchronous
    base_names: Mapping[str, str]  # LoRA policy -> the base its saved adapter names (portable_model_name)


def resolve(cfg: ArenaConfig, run_dir: Path, resume: Path | None = None, dist: Dist = SINGLE) -> Plan:
    """The run's :class:`Plan`, with every check that needs no model: one line at the first problem."""
    from arena.loop.components import COMPONENTS

    env = cfg.game.make_env()  # its seats
    league = adapter_league(cfg)
    check_trainable(cfg, list(env.possible_agents), dist, league)
    report_untrained_phases(cfg, env)
    staleness = cfg.train.async_.max_staleness if cfg.train.async_ is not None else 0
    learners = {n: resolve_precision(cfg.learner_for(n)) for n in cfg.trainables}
    share = shared_bases(cfg, learners, staleness)
    engines = engine_groups(cfg, share)  # vLLM adapters over one base: one engine each group
    if league:  # the league's members join the trainable policy's engine as adapters
        engines.setdefault(cfg.trainable, [cfg.trainable])  # type: ignore[arg-type]
    base_names = {n: portable_model_name(cfg.policies[n].model) for n, lc in learners.items() if lc.lora is not None}
    plan = Plan(cfg=cfg, run_dir=run_dir, resume=resume, dist=dist, names=tuple(used_policies(cfg)), learners=learners,
                share=share, engines=engines, extra_loras=cfg.train.league.pool_size if league else 0,
                adapter_league=league, staleness=staleness, base_names=base_names)
    for component in COMPONENTS:
        component.prepare(plan)
    return plan


def resolve_precision(learner: Any) -> Any:
    """``param_dtype: auto`` and ``autocast_bf16: auto`` made concrete for the learner's device:
    bf16 weights where bf16 is fast, and then no autocast (the weights are bf16 already)."""
    from arena.policies.hardware import fast_bf16

    fast = fast_bf16(learner.device) and learner.backend == "torch"
    update: dict[str, Any] = {}
    if learner.param_dtype == "auto":
        update["param_dtype"] = "bfloat16" if fast else "float32"
    if learner.autocast_bf16 == "auto":
        update["autocast_bf16"] = fast and update.get("param_dtype", learner.param_dtype) != "bfloat16"
    return learner.model_copy(update=update)


def precision_report(cfg: ArenaConfig) -> str:
    """One line: what ``dtype: auto`` resolved to for each model policy that uses it, with the reason,
    and the learner's weights and autocast (printed by ``arena.train`` at start-up)."""
    from arena.policies.hardware import auto_dtype

    parts = []
    for name, spec in cfg.policies.items():
        if isinstance(spec, ModelPolicySpec) and spec.backend != "openai":
            dtype, why = auto_dtype(spec.device) if spec.dtype == "auto" else (spec.dtype, "set in the config")
            parts.append(f"policies.{name} {dtype} on {spec.device} ({'auto: ' if spec.dtype == 'auto' else ''}{why})")
    learner = resolve_precision(cfg.learner)
    weights = "bf16 weights, fp32 master" if learner.param_dtype == "bfloat16" else "float32 weights"
    parts.append(f"learner {weights}{', bf16 autocast' if learner.autocast_bf16 else ''} on {cfg.learner.device}")
    return "precision: " + "; ".join(parts)


def check_trainable(cfg: ArenaConfig, seats: list[str], dist: Dist = SINGLE, league: bool = False) -> None:
    """A trainable policy exists and one of the game's ``seats`` plays each one (the first seat pattern that
    matches decides; no model needed); what several trainable policies do not support yet is refused in one
    line. ``league``: the league's members are adapters on a trainable policy's vLLM engine."""
    import fnmatch

    if cfg.trainable is None:
        raise ConfigError("policies: no trainable policy; set 'trainable: true' on one model policy")
    table = cfg.seat_table()
    if cfg.trainable not in table.values():
        raise ConfigError(f"seats: no seat plays the trainable policy {cfg.trainable!r}; map a pattern to it")
    played = {next((name for pattern, name in table.items() if fnmatch.fnmatchcase(seat, pattern)), None) for seat in seats}
    for name in cfg.trainables:
        if name not in played:
            raise ConfigError(f"config: policies.{name}: trainable, but no seat plays it (seats: "
                              f"{', '.join(f'{p}: {q}' for p, q in table.items())}; the first matching pattern "
                              f"wins); map one of the game's seats ({', '.join(seats)}) to it")
    if len(cfg.trainables) > 1:
        several = f"policies: {', '.join(cfg.trainables)} are all trainable"
        unsupported = [("a league of adapters on vLLM (train.league with learner.lora and backend vllm)", league), ("train.warm_start", cfg.train.warm_start is not None),
                       ("train.async", bool(cfg.train.async_ and cfg.train.async_.max_staleness)),
                       ("several ranks", dist.active)]
        unsupported += [(f"policies.{n}.learner.backend deepspeed", cfg.learner_for(n).backend == "deepspeed")
                        for n in cfg.trainables]
        for what, on in unsupported:
            if on:
                raise ConfigError(f"{several}; {what} supports one trainable policy for now: turn it off or "
                                  "train one policy (docs/guides/several-policies.md)")


def report_untrained_phases(cfg: ArenaConfig, env: Any) -> None:
    missing = [p for p in getattr(env, "phases", ()) if p not in cfg.learner.estimators]
    if missing:
        print(f"note: no estimator for phase(s) {', '.join(missing)}: their turns are not trained "
              "(add them under learner.estimators)", file=sys.stderr)


def shared_bases(cfg: ArenaConfig, learners: Mapping[str, Any] | None = None, staleness: int = 0) -> dict[str, str]:
    """Trainable policy -> its group (the group's first policy) of LoRA policies that hold ONE base with a named
    adapter each (``learner.lora.shared_base``, arena/learners/adapters.py): two or more over the same model,
    dtype and device, with synchronous rollouts. On hf generators whose dtype is the learner's weights,
    learners and generators share that base; on vLLM generators the learners share one base (same weights'
    dtype and device) and one engine serves every adapter (:func:`shared_engine_policies`). A policy alone on
    its base is in no group. ``shared_base: true`` on a policy that cannot share, or on adapters over different
    bases, is one line; ``false`` opts out."""
    if len(cfg.trainables) < 2:
        lone = cfg.learner_for(cfg.trainables[0]).lora if cfg.trainables else None
        if lone is not None and lone.shared_base is True:
            raise ConfigError(f"policies.{cfg.trainables[0]}: learner.lora.shared_base is true, but it is the only "
                              "trainable policy: there is no base to share; set shared_base: false or train several")
        return {}
    groups: dict[tuple[str, ...], list[str]] = {}
    asked: dict[str, tuple[str, ...]] = {}  # shared_base: true -> the policy's base
    for name in cfg.trainables:
        lc = learners[name] if learners is not None else resolve_precision(cfg.learner_for(name))
        spec = cfg.policies[name]
        if lc.lora is None or lc.lora.shared_base is False or not isinstance(spec, ModelPolicySpec):
            continue
        why = None
        if spec.backend not in ("hf", "vllm"):
            why = f"its backend is {spec.backend}; adapters share a base on the hf and vllm backends"
        elif spec.backend == "hf" and (spec.resolved_dtype, spec.device) != (lc.param_dtype, lc.device):
            why = (f"its generator ({spec.resolved_dtype} on {spec.device}) differs from its learner's weights "
                   f"({lc.param_dtype} on {lc.device}), so they cannot share one base")
        elif staleness:
            why = "train.async plays while the learners update, on weights of their own"
        if why is not None:
            if lc.lora.shared_base is True:
                raise ConfigError(f"policies.{name}: learner.lora.shared_base is true but {why}; fix that or set "
                                  "learner.lora.shared_base: false")
            continue
        key: tuple[str, ...] = (portable_model_name(spec.model), spec.resolved_dtype, spec.device)
        if spec.backend == "vllm":  # one engine; the learners' own base apart from it
            key += (f"vllm (learner {lc.param_dtype} on {lc.device})",)
        groups.setdefault(key, []).append(name)
        if lc.lora.shared_base is True:
            asked[name] = key
    if len(set(asked.values())) > 1:
        bases = ", ".join(f"{n}: {' '.join(k)}" for n, k in asked.items())
        raise ConfigError(f"learner.lora.shared_base: true asks adapters over different bases to share one ({bases}); "
                          "give them one model, dtype, device and backend, or set shared_base: false")
    alone = [n for n, key in asked.items() if len(groups[key]) < 2]
    if alone:
        raise ConfigError(f"policies.{alone[0]}: learner.lora.shared_base is true but no other trainable LoRA policy "
                          "over the same model, dtype and device shares its base; give another policy the same base, "
                          "or set shared_base: false")
    return {name: members[0] for members in groups.values() if len(members) > 1 for name in members}


def engine_groups(cfg: ArenaConfig, share: dict[str, str]) -> dict[str, list[str]]:
    """The groups of :func:`shared_bases` whose generators are vLLM: group -> its policies."""
    groups: dict[str, list[str]] = {}
    for name, group in share.items():
        if cfg.policies[name].backend == "vllm":  # type: ignore[union-attr]
            groups.setdefault(group, []).append(name)
    return groups


def adapter_league(cfg: ArenaConfig) -> bool:
    """``train.league`` whose members are adapters served on a trainable policy's vLLM engine: a LoRA policy
    with backend vllm (arena/loop/components/league.py, "Members as adapters")."""
    def served(name: str) -> bool:
        spec = cfg.policies.get(name)
        return isinstance(spec, ModelPolicySpec) and spec.backend == "vllm" and cfg.learner_for(name).lora is not None

    return cfg.train.league.enabled and any(served(n) for n in cfg.trainables)


def portable_model_name(name: str) -> str:
    """How a saved adapter names its base: a built-in or hub id as given, a local folder as an absolute path."""
    from arena.core.models import BUILTIN_MODELS, local_model

    if name in BUILTIN_MODELS or not Path(name).expanduser().is_dir():
        return name
    return str(Path(local_model(name)).resolve())


