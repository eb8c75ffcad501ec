"""The trainer's object graph, built from a validated config: policies, the learner, the runner and
game state, the league, evaluations, the episode log and the loggers.

:func:`build_trainer_parts` is the one place that turns an :class:`~arena.loop.config.ArenaConfig`
into these parts; :class:`~arena.loop.trainer.Trainer` receives them and only runs the loop. The
checks that need no model (a trainable policy with a seat, trackers installed, async settings) run
first, so a bad config fails before any model loads.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from arena.core.distributed import SINGLE, Dist
from arena.core.errors import ConfigError
from arena.loop.canary import auto_max_gap
from arena.loop.config import ArenaConfig
from arena.learners.estimators import EstimatorStates
from arena.learners.schedule import make_schedule
from arena.learners.update import Learner
from arena.policies.config import ModelPolicySpec


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


@dataclass
class Trained:
    """One trainable policy and what it owns: its generator, learner, samples' estimator states, weight
    sync and canary. A run trains one per ``trainable: true`` policy, each on its own seats' turns only."""

    name: str
    generator: Any  # the policy's generation backend (one of the run's ``policies``)
    tokenizer: Any
    learner: Learner
    adapter_sync: AdapterFolders | None  # LoRA with a vLLM generator: adapter folders, else None
    canary_max_gap: float | None
    generator_dtype: str  # the canary rounds the learner's weights to it
    estimator_states: EstimatorStates
    pushed: int | None = None  # the learner version the generator holds (Learner.version); None: never pushed


@dataclass
class TrainerParts:
    """What a :class:`~arena.loop.trainer.Trainer` runs: every object it needs, built from the config."""

    policies: dict[str, Any]
    trained: list[Trained]  # one per trainable policy, the config's first trainable policy first
    staleness: int  # train.async's max_staleness, 0 when rollouts are synchronous
    schedule: Any
    probe_env: Any  # an env of the game: computes the step metrics
    state: Any  # the game's cross-episode state, or None
    runner: Any
    league: Any
    warm: Any
    evals: Any
    episode_log: Any


def check_trainable(cfg: ArenaConfig, seats: list[str], dist: Dist = SINGLE) -> None:
    """A trainable policy exists and one of the game's ``seats`` plays each one (no model needed); what
    several trainable policies do not support yet is refused in one line."""
    if cfg.trainable is None:
        raise ConfigError("policies: no trainable policy; set 'trainable: true' on one model policy")
    from arena.loop.checks import check_trainable_seats

    if cfg.trainable not in cfg.seat_table().values():
        raise ConfigError(f"seats: no seat plays the trainable policy {cfg.trainable!r}; map a pattern to it")
    check_trainable_seats(cfg, seats, "config")
    if len(cfg.trainables) > 1:
        several = f"policies: {', '.join(cfg.trainables)} are all trainable"
        unsupported = [("a league of adapters on vLLM (train.league with learner.lora and backend vllm)",
                        adapter_league(cfg)), ("train.warm_start", cfg.train.warm_start is not None),
                       ("train.async", bool(cfg.train.async_ and cfg.train.async_.max_staleness)),
                       ("several ranks", dist.active)]
        unsupported += [(f"policies.{n}.learner.backend deepspeed", cfg.learner_for(n).backend == "deepspeed")
                        for n in cfg.trainables]
        for what, on in unsupported:
            if on:
                raise ConfigError(f"{several}; {what} supports one trainable policy for now: turn it off or "
                                  "train one policy (docs/guides/several-policies.md)")


def check_async(cfg: ArenaConfig, dist: Dist) -> None:
    if cfg.train.async_ is None or not cfg.train.async_.max_staleness:
        return
    if dist.active:
        raise ConfigError("train.async: async rollouts run on one rank for now; remove train.async or run one rank")
    if cfg.train.league.enabled:
        raise ConfigError("train.async: async rollouts with train.league are not supported (the league assigns "
                          "opponents from checkpoints as they are written); turn one of them off")


def report_untrained_phases(cfg: ArenaConfig, env: Any) -> None:
    missing = [p for p in getattr(env, "phases", ()) if p not in cfg.learner.estimators]
    if missing:
        print(f"note: no estimator for phase(s) {', '.join(missing)}: their turns are not trained "
              "(add them under learner.estimators)", file=sys.stderr)


def shared_bases(cfg: ArenaConfig, staleness: int = 0) -> dict[str, str]:
    """Trainable policy -> its group (the group's first policy) of LoRA policies that hold ONE base with a named
    adapter each (``learner.lora.shared_base``, arena/learners/adapters.py): two or more over the same model,
    dtype and device, with synchronous rollouts. On hf generators whose dtype is the learner's weights,
    learners and generators share that base; on vLLM generators the learners share one base (same weights'
    dtype and device) and one engine serves every adapter (:func:`shared_engine_policies`). A policy alone on
    its base is in no group. ``shared_base: true`` on a policy that cannot share, or on adapters over different
    bases, is one line; ``false`` opts out."""
    if len(cfg.trainables) < 2:
        return {}
    groups: dict[tuple[str, ...], list[str]] = {}
    asked: dict[str, tuple[str, ...]] = {}  # shared_base: true -> the policy's base
    for name in cfg.trainables:
        lc, spec = resolve_precision(cfg.learner_for(name)), cfg.policies[name]
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
    return {name: members[0] for members in groups.values() if len(members) > 1 for name in members}


def engine_groups(cfg: ArenaConfig, share: dict[str, str]) -> dict[str, list[str]]:
    """The groups of :func:`shared_bases` whose generators are vLLM: group -> its policies."""
    groups: dict[str, list[str]] = {}
    for name, group in share.items():
        if cfg.policies[name].backend == "vllm":  # type: ignore[union-attr]
            groups.setdefault(group, []).append(name)
    return groups


def shared_engine_policies(cfg: ArenaConfig, groups: dict[str, list[str]], extra_loras: int = 0) -> dict[str, Any]:
    """One vLLM engine per group of :func:`engine_groups` and one :class:`~arena.policies.vllm.VLLMPolicy` per
    member on it, each with its own adapter (from the first update on; the base until then). The engine takes
    its first member's settings, the largest context and KV cache of the group, LoRA of the largest rank, and
    a slot (``max_loras``) per member, plus ``extra_loras`` (league members served as adapters)."""
    from arena.core.models import resolve_model
    from arena.loop.build import engine_policy, group_engine
    from arena.policies.vllm import adapter_info

    policies: dict[str, Any] = {}
    for members in groups.values():
        specs: list[ModelPolicySpec] = [cfg.policies[n] for n in members]  # type: ignore[misc]
        first = specs[0]
        fixed = adapter_info(resolve_model(first.model))  # a policy that starts from an adapter: its base
        ranks = [cfg.learner_for(n).lora.r for n in members]  # type: ignore[union-attr]
        engine = group_engine(fixed[0] if fixed else first.model, specs, max(ranks + [fixed[1]] if fixed else ranks),
                              len(members) + extra_loras)
        for name, spec in zip(members, specs, strict=True):
            policies[name] = engine_policy(spec, name, engine)
    return policies


def adapter_league(cfg: ArenaConfig) -> bool:
    """``train.league`` whose members are adapters served on a trainable policy's vLLM engine: a LoRA policy
    with backend vllm (arena/loop/league.py, "Members as adapters")."""
    def served(name: str) -> bool:
        spec = cfg.policies.get(name)
        return isinstance(spec, ModelPolicySpec) and spec.backend == "vllm" and cfg.learner_for(name).lora is not None

    return cfg.train.league.enabled and any(served(n) for n in cfg.trainables)


def league_member_policy(cfg: ArenaConfig, trainable: Any, spec: ModelPolicySpec | str, name: str) -> Any:
    """A league member's policy: a model member (an adapter checkpoint, or the base) served on the trainable
    policy's vLLM engine under its own adapter; a bot as :func:`arena.loop.build.league_policy` makes it. A
    member over another base is one line (``train.league``)."""
    from arena.loop.build import engine_policy, league_policy

    if isinstance(spec, str):
        return league_policy(cfg, spec, name)
    try:
        return engine_policy(spec, name, trainable.shared_engine)
    except ValueError as e:
        raise ConfigError(f"train.league: {e}; a league of adapters plays on the trainable policy's base") from None


def build_learner(cfg: ArenaConfig, name: str, policies: dict[str, Any], store: Any, staleness: int,
                  dist: Dist, share: dict[str, str], bases: dict[tuple[str, str, str], Any] | None = None
                  ) -> tuple[Learner, Any]:
    """Trainable policy ``name``'s learner and tokenizer. An hf generator on the learner's device whose dtype
    is the learner's weights' shares the learner's model: nothing to sync. With bf16 weights the fp32
    master then starts from the generator's bf16 copy of the initial weights. With async rollouts
    (k >= 1) the generator plays while the learner updates: it needs its own copy. A policy whose base
    is shared (in ``share``, :func:`shared_bases`) trains its own named adapter on it (arena/learners/adapters.py);
    with vLLM generators the group's learners load that base once (``bases``: (model, device, weights' dtype)
    -> model and tokenizer)."""
    from arena.learners.auso import resolve_length_cap  # AUSO's length cap "auto": this policy's token budget
    from arena.loop.build import reference_model

    generator = policies[name]
    spec: ModelPolicySpec = cfg.policies[name]  # type: ignore[assignment]
    caps = [spec.sampling.max_new_tokens] + [o.max_new_tokens for o in spec.phase_sampling.values() if o.max_new_tokens]
    learner_cfg = resolve_length_cap(resolve_precision(cfg.learner_for(name)), max(caps))
    if (spec.resolved_dtype == learner_cfg.param_dtype and spec.backend == "hf" and spec.device == learner_cfg.device
            and not staleness):
        model, tokenizer = generator.model, generator.tokenizer
    else:
        from arena.core.models import load_causal_lm, resolve_model

        key = (resolve_model(spec.model), learner_cfg.device, learner_cfg.param_dtype)
        if name in share and bases is not None and key in bases:
            model, tokenizer = bases[key]
        else:
            model, tokenizer = load_causal_lm(spec.model, dtype="float32", device=learner_cfg.device)
            if name in share and bases is not None:
                bases[key] = (model, tokenizer)
    if name in share and learner_cfg.lora is not None:
        from arena.learners.adapters import policy_adapter

        model = policy_adapter(model, name, learner_cfg.lora, store.adapters)
    ref = reference_model(cfg, policies, store, learner_cfg.device, name) if learner_cfg.beta > 0 else None
    return Learner(model, learner_cfg, tokenizer.pad_token_id, spec.sampling.temperature, ref, dist), tokenizer


def build_trained(cfg: ArenaConfig, name: str, policies: dict[str, Any], store: Any, staleness: int, dist: Dist,
                  run_dir: Path, share: dict[str, str], bases: dict[tuple[str, str, str], Any] | None = None
                  ) -> Trained:
    """Trainable policy ``name``: its learner, adapter sync (LoRA with vLLM) and canary bound."""
    generator = policies[name]
    spec: ModelPolicySpec = cfg.policies[name]  # type: ignore[assignment]
    learner, tokenizer = build_learner(cfg, name, policies, store, staleness, dist, share, bases)
    adapter_sync = None
    if learner.cfg.lora is not None:  # checkpoints hold the adapter; it loads over this base
        from arena.learners.lora import set_base_name

        set_base_name(learner.module, portable_model_name(spec.model))
        if hasattr(generator, "load_adapter"):  # vLLM: the adapter alone, a fresh version each update
            folder = ".adapter_sync" if name == cfg.trainable else f".adapter_sync/{name}"
            adapter_sync = AdapterFolders(run_dir / folder)
        elif hasattr(learner.module, "activate"):  # an hf shared base: the generator runs this policy's adapter
            generator.adapter = learner.module.activate
    bound = cfg.train.sync_canary_max_gap
    # Either side in bf16 leaves a bf16-sized gap after a correct sync.
    sides = "float32" if spec.resolved_dtype == learner.cfg.param_dtype == "float32" else "bfloat16"
    return Trained(
        name=name, generator=generator, tokenizer=tokenizer, learner=learner,
        adapter_sync=adapter_sync, canary_max_gap=auto_max_gap(sides) if bound == "auto" else bound,
        generator_dtype=spec.resolved_dtype, estimator_states=EstimatorStates(learner.cfg.estimators),
    )


def build_trainer_parts(cfg: ArenaConfig, run_dir: Path, resume: Path | None = None, dist: Dist = SINGLE) -> TrainerParts:
    """Every part of a training run, in the order that fails cheapest first: the config checks, then
    the policies (bots before models), the learner, the game's state and runner, the league, the warm
    start, the evaluations and the episode log."""
    from arena.loop.build import ModelStore, build_policies, build_runner, league_policy, sampling_table, used_policies
    from arena.loop.loggers import check_installed, check_reachable

    env = cfg.game.make_env()  # its seats, and the game's step metrics
    check_trainable(cfg, list(env.possible_agents), dist)
    check_installed(cfg.train.loggers)  # before any model loads
    check_reachable(cfg.train.loggers)
    staleness = cfg.train.async_.max_staleness if cfg.train.async_ is not None else 0
    check_async(cfg, dist)
    share = shared_bases(cfg, staleness)  # before any model loads
    store = ModelStore()
    engines = engine_groups(cfg, share)  # vLLM adapters over one base: one engine each group
    extra = 0
    if adapter_league(cfg):  # the league's members join the trainable policy's engine as adapters
        engines.setdefault(cfg.trainable, [cfg.trainable])  # type: ignore[arg-type]
        extra = cfg.train.league.pool_size
    served = {n for members in engines.values() for n in members}
    names = used_policies(cfg)
    built = build_policies(cfg, [n for n in names if n not in served], store=store, share=share)
    built |= shared_engine_policies(cfg, engines, extra)
    policies = {n: built[n] for n in names}
    bases: dict[tuple[str, str, str], Any] = {}  # the learners' shared bases (vLLM groups)
    trained = [build_trained(cfg, name, policies, store, staleness, dist, run_dir, share, bases)
               for name in cfg.trainables]
    state = env.make_state()
    runner = build_runner(cfg, policies, state=state)
    league = None
    if cfg.train.league.enabled:  # past checkpoints as opponents, rated matches (arena/loop/league.py)
        from arena.loop.league import League

        if adapter_league(cfg):
            league = League(cfg, run_dir, runner, partial(league_member_policy, cfg, policies[cfg.trainable]),
                            together=True)
        else:
            league = League(cfg, run_dir, runner, partial(league_policy, cfg))
    report_untrained_phases(cfg, env)
    run_dir.mkdir(parents=True, exist_ok=True)
    warm = None
    if cfg.train.warm_start is not None:  # supervised fine-tuning before self-play (arena/loop/warm_start.py)
        from arena.loop.warm_start import WarmStart

        warm = WarmStart(cfg, run_dir)
        if resume is None and dist.main and warm.path.exists():
            warm.path.unlink()
    evals = None
    if cfg.train.evals:  # held-out games with the current weights (arena/loop/evals.py)
        from arena.loop.evals import TrainEvals

        evals = TrainEvals(cfg, run_dir, dist, sampling_table(cfg))
    episode_log = None
    if cfg.train.save_episodes and dist.main:
        from arena.view.record import EpisodeLog

        group_by = {phase: list(est.group_by) for phase, est in cfg.learner.estimators.items()}
        episode_log = EpisodeLog(run_dir, cfg.train.episodes_max_mb, trained[0].tokenizer, cfg.trainable, group_by,
                                 fresh=resume is None)
    return TrainerParts(
        policies=policies, trained=trained, staleness=staleness,
        schedule=make_schedule(cfg.train.schedule, list(dict.fromkeys(p for t in trained for p in t.learner.cfg.estimators))),
        probe_env=env, state=state,
        runner=runner, league=league, warm=warm, evals=evals, episode_log=episode_log,
    )


def open_loggers(cfg: ArenaConfig, run_dir: Path, dist: Dist) -> Any:
    """Write the run's config.json (rank 0) and open its trackers (arena/loop/loggers.py)."""
    from arena.loop.loggers import Loggers, code_version

    config = resolved_config(cfg) | {"code": code_version()} if dist.main else {}
    if dist.main:
        (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    return Loggers(cfg.train.loggers, run_dir, config)


def portable_model_name(name: str) -> str:
    """How a saved adapter names its base: a built-in or hub id as given, a local folder as an absolute path."""
    from arena.core.models import BUILTIN_MODELS, local_model

    if name in BUILTIN_MODELS or not Path(name).expanduser().is_dir():
        return name
    return str(Path(local_model(name)).resolve())


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


def resolved_config(cfg: ArenaConfig) -> dict[str, Any]:
    """The run's full config as JSON (game settings inlined), written to config.json."""
    game = {"name": cfg.game.name, **cfg.game.settings.model_dump(mode="json", by_alias=True)}
    return cfg.model_dump(mode="json", exclude={"game"}, by_alias=True) | {"game": game}
