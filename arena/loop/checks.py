"""Cross-checks of a parsed config, each a one-line :class:`~arena.core.errors.ConfigError`: between its
sections (one trainable policy, seats naming known policies), against what the game declares (bots,
phases, probes, metrics, policy names in its settings) and against the models (names that exist,
LoRA targets that match layers), all before any model's weights load. :func:`check_against_game`
runs them in order; :func:`arena.loop.config.parse_config` calls it on every config it validates.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from arena.core.errors import format_validation_error

from arena.core.errors import ConfigError
from arena.learners.schedule import schedule_phases
from arena.loop.example_games import example_episode
from arena.policies.config import ModelPolicySpec, shorthand_policy

if TYPE_CHECKING:
    from arena.loop.config import ArenaConfig


def check_against_game(cfg: ArenaConfig, origin: str = "config") -> None:
    """Cross-checks between sections and against what the game declares (one line each); each component's own
    checks (arena/loop/components/) run after them, against the game's env."""
    from arena.loop.components import COMPONENTS

    check_policy_learners(cfg, origin)
    check_policy_names(cfg, origin)
    for pattern, name in cfg.seats.items():
        if name not in cfg.policies and shorthand_policy(name) is None:
            known = ", ".join([*cfg.policies, "human", "scripted:<bot>"])
            raise ConfigError(f"{origin}: seats.{pattern}: unknown policy {name!r}; known: {known}")
    if cfg.learner.reference != "auto" and cfg.learner.reference not in cfg.policies:
        raise ConfigError(f"{origin}: learner.reference: unknown policy {cfg.learner.reference!r}; "
                          f"valid: auto, {', '.join(cfg.policies) or '(no policies)'}")
    check_bots(cfg, origin)
    check_game_policy_names(cfg, origin)
    check_models(cfg, origin, policies=False)  # the game's own models (an embedding model) before it is made
    try:
        env = cfg.game.make_env()
    except (ValueError, OSError) as e:  # a file the game reads at start-up (a skill library): one line
        raise ConfigError(f"{origin}: game: {' '.join(str(e).split())}") from None
    for component in COMPONENTS:
        component.check(cfg, env, origin)
    check_models(cfg, origin, game=False)
    check_lora_targets(cfg, origin)
    from arena.learners.checks import check_game

    for name in cfg.trainables:  # what each learner asks of the game (per-observation baselines: recurring observations)
        try:
            check_game(cfg.game.cls, cfg.learner_for(name))
        except ConfigError as e:
            raise ConfigError(f"{origin}: {e}") from None
    seat_map = cfg.seat_table()
    for seat in env.possible_agents:
        if not any(fnmatch.fnmatchcase(seat, p) for p in seat_map):
            raise ConfigError(f"{origin}: seats: no pattern matches seat {seat!r}; add one (e.g. '*': learner)")
    check_choice_backends(cfg, env, origin)
    check_probes_and_metrics(cfg, env, origin)
    phases = tuple(getattr(env, "phases", ()) or ())
    if not phases:
        return
    named: list[tuple[str, str]] = [(f"learner.estimators.{p}", p) for p in cfg.learner.estimators]
    for pname in cfg.trainables:  # a trainable policy's own estimators meet the same check
        own = cfg.policies[pname].learner or {}  # type: ignore[union-attr]
        named += [(f"policies.{pname}.learner.estimators.{p}", p) for p in own.get("estimators") or {}]
    named += [(f"train.schedule", p) for p in sorted(schedule_phases(cfg.train.schedule))]
    named += [("train.warm_start.phases", p) for p in getattr(cfg.train.warm_start, "phases", None) or ()]
    for pname, spec in cfg.policies.items():
        if isinstance(spec, ModelPolicySpec):
            named += [(f"policies.{pname}.phase_sampling.{p}", p) for p in spec.phase_sampling]
    for where, phase in named:
        if phase not in phases:
            raise ConfigError(f"{origin}: {where}: the game has no phase {phase!r}; its phases: {', '.join(phases)}")


#: A policy's name is a folder (``policies/<name>/`` in checkpoints) and a prefix of its logged figures.
POLICY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
#: Names the loop gives policies of its own: the league's opponent and the seat shorthands (human, scripted:<bot>).
RESERVED_POLICY_NAMES = ("league", "human", "scripted")


def check_policy_names(cfg: ArenaConfig, origin: str = "config") -> None:
    """Each policy name is an identifier (no path, no ``scripted:`` shorthand) and none of the loop's own."""
    for name in cfg.policies:
        if not POLICY_NAME.match(str(name)):
            raise ConfigError(f"{origin}: policies: {str(name)!r} is not a valid policy name; a name is a folder "
                              "(policies/<name>/) and a log prefix: a letter or '_', then letters, digits, '_' or '-' "
                              "(at most 64)")
        if str(name) in RESERVED_POLICY_NAMES:
            raise ConfigError(f"{origin}: policies.{name}: the name is reserved for the loop's own policies "
                              f"({', '.join(RESERVED_POLICY_NAMES)}); choose another")


def check_policy_learners(cfg: ArenaConfig, origin: str = "config") -> None:
    """A policy's ``learner:`` changes belong to a trainable policy and make a valid learner section."""
    from arena.learners.config import LearnerConfig

    for name, spec in cfg.policies.items():
        if not isinstance(spec, ModelPolicySpec) or not spec.learner:
            continue
        if not spec.trainable:
            raise ConfigError(f"{origin}: policies.{name}.learner: only a trainable policy has a learner; "
                              f"set policies.{name}.trainable: true or remove its learner section")
        unknown = sorted(set(spec.learner) - set(LearnerConfig.model_fields))
        if unknown:
            raise ConfigError(f"{origin}: policies.{name}.learner.{unknown[0]}: not a learner setting; valid: "
                              f"{', '.join(LearnerConfig.model_fields)}")
        try:
            cfg.learner_for(name)
        except ValidationError as e:
            raise ConfigError(f"{origin}: {format_validation_error(e, f'policies.{name}.learner')}") from None


def check_lora_targets(cfg: ArenaConfig, origin: str = "config") -> None:
    """Each trainable policy's LoRA targets name layers of its model (read from its config, no weights)."""
    from arena.learners.lora import check_targets

    for name in cfg.trainables:
        lora = cfg.learner_for(name).lora
        if lora is None:
            continue
        own = "lora" in (cfg.policies[name].learner or {})  # type: ignore[union-attr]
        where = f"policies.{name}.learner.lora.target_modules" if own else "learner.lora.target_modules"
        check_targets(cfg.policies[name].model, lora, f"{origin}: {where}")  # type: ignore[union-attr]


def check_choice_backends(cfg: ArenaConfig, env: Any, origin: str = "config") -> None:
    """A game that hands model seats choices (OpenSpiel's ``action_mode: score``) needs a backend that scores
    them: hf (arena/policies/choices.py); scripted bots and people ignore choices."""
    if not env.uses_choices():
        return
    from arena.runner import SeatMap

    table = SeatMap(cfg.seat_table())
    for seat in env.possible_agents:
        name = table.policy_for(seat)
        spec = cfg.policies.get(name)
        if isinstance(spec, ModelPolicySpec) and spec.backend != "hf":
            raise ConfigError(f"{origin}: policies.{name}.backend: {spec.backend!r} cannot play seat {seat} by "
                              "scoring its legal actions (game.action_mode: score); valid there: hf")


def _settings_fields(model: BaseModel, prefix: str) -> list[tuple[str, str, Any]]:
    """(dotted field, field name, value) of every field of a settings model and its nested models."""
    out: list[tuple[str, str, Any]] = []
    for key in type(model).model_fields:
        value = getattr(model, key, None)
        out.append((f"{prefix}.{key}", key, value))
        if isinstance(value, BaseModel):
            out += _settings_fields(value, f"{prefix}.{key}")
    return out


def check_model_name(where: str, name: str, origin: str = "config") -> None:
    """A built-in model name, a local model/checkpoint/run folder or a hub id; else one line (no weights read)."""
    from arena.core.models import BUILTIN_MODELS, local_model

    if name in BUILTIN_MODELS:
        return
    try:
        local_model(name)
    except FileNotFoundError as e:
        raise ConfigError(f"{origin}: {where}: {' '.join(str(e).split())}; valid: a built-in "
                          f"({', '.join(BUILTIN_MODELS)}), a local model folder or a hub id (org/name)") from None
    # A hub id is checked when a run first loads it (arena.core.models.load_causal_lm: the local cache,
    # else one request to the hub), not here: validating a config (a paper's GPU recipe) needs no network.


def check_models(cfg: ArenaConfig, origin: str = "config", policies: bool = True, game: bool = True) -> None:
    """Every model path in the config (policies, reward models, the game's ``*_model`` settings) names a model
    that exists (a built-in, a local folder or a plausible hub id), before any model loads."""
    for pname, spec in cfg.policies.items() if policies else ():
        model = getattr(spec, "model", None)
        if isinstance(model, str) and getattr(spec, "backend", "hf") != "openai":
            check_model_name(f"policies.{pname}.model", model, origin)
    for where, key, value in _settings_fields(cfg.game.settings, "game") if game else ():
        if isinstance(value, str) and (key == "model" or key.endswith("_model")):
            check_model_name(where, value, origin)


def check_bots(cfg: ArenaConfig, origin: str = "config") -> None:
    """Every scripted policy names a bot the game has and can play in this configuration (a bot's
    ``check_settings(game settings)``, where it has one), before a tournament prints its schedule."""
    from arena.policies.config import ScriptedSpec
    from arena.policies.scripted import make_bot

    named = [(f"policies.{pname}.bot", spec.bot) for pname, spec in cfg.policies.items() if isinstance(spec, ScriptedSpec)]
    if cfg.play.bot != "default":  # "default" is only a default (a saved config.json writes it out), not every game's bot
        named.append(("play.bot", cfg.play.bot))
    named += [(f"train.league.bots.{i}", bot.removeprefix("scripted:")) for i, bot in enumerate(cfg.train.league.bots)]
    named += [(f"seats.{pattern}", spec.bot) for pattern, name in cfg.seats.items()
              if name not in cfg.policies and isinstance(spec := shorthand_policy(name), ScriptedSpec)]
    for where, bot in named:
        try:
            check = getattr(make_bot(cfg.game.cls, bot), "check_settings", None)
            if check is not None:  # a bot that plays only some configurations (br:<bot>: games it can enumerate)
                check(cfg.game.settings)
        except ValueError as e:
            raise ConfigError(f"{origin}: {where}: {' '.join(str(e).split())}") from None


def check_game_policy_names(cfg: ArenaConfig, origin: str = "config") -> None:
    """Every ``policy`` / ``*_policy`` setting of the game (Skill-SP's ``evolution.policy``) names a policy
    of the table, at start-up rather than when the game first asks for it."""
    for where, key, value in _settings_fields(cfg.game.settings, "game"):
        if isinstance(value, str) and (key == "policy" or key.endswith("_policy")) and value not in cfg.policies:
            raise ConfigError(f"{origin}: {where}: unknown policy {value!r}; valid: "
                              f"{', '.join(cfg.policies) or '(no policies)'}")


def check_probes_and_metrics(cfg: ArenaConfig, env: Any, origin: str = "config") -> None:
    """Every probe an objective term reads is one the game records (AUSO's 'teacher' needs household's
    ``skills.probes: true``), and every episode metric an estimator reads (AUSO's ``pass_metric``) is one the
    game reports: one game played with the action spaces' examples tells, no model needed."""
    from arena.learners.estimators import get_estimator
    from arena.learners.objectives import get_objective

    probes: list[tuple[str, str]] = []
    for i, term in enumerate(cfg.learner.objectives):
        opts = get_objective(term.name).options.model_validate(term.options)
        if isinstance(getattr(opts, "probe", None), str):
            probes.append((f"learner.objectives.{i}.options.probe ({term.name})", opts.probe))
    metrics: list[tuple[str, str]] = []
    for phase, est in cfg.learner.estimators.items():
        opts = get_estimator(est.name).options.model_validate(est.options)
        if isinstance(getattr(opts, "pass_metric", None), str):
            metrics.append((f"learner.estimators.{phase}.options.pass_metric", opts.pass_metric))
    if not probes and not metrics:
        return
    env.reset(seed=cfg.train.seed)
    recorded = set(env.probe_prompts(env.agent_selection))
    for where, probe in probes:
        if probe not in recorded:
            hint = ", ".join(sorted(recorded)) or "none (household records them with game.skills.probes: true)"
            raise ConfigError(f"{origin}: {where}: the game records no probe {probe!r}; it records: {hint}")
    if metrics:
        episode = example_episode(env, cfg.train.seed)
        if episode is None:
            return
        reported = set(episode.metrics)
        for where, metric in metrics:
            if metric not in reported:
                raise ConfigError(f"{origin}: {where}: the game reports no metric {metric!r}; "
                                  f"it reports: {', '.join(sorted(reported)) or 'none'}")
