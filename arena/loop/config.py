"""YAML -> validated pydantic config. Every mistake is one line naming the field.

A config file has one section per component. ``game`` names the game and
carries its settings, which the game's own ``config_type`` validates, so a typo
in ``games/spy/spy.yaml`` is reported as ``game.mask_ratio`` with the bad value and
what would be valid, before any model is loaded. ``--set a.b=value`` overrides
any key; the value is parsed as YAML (``--set game.n_players=4``).
Each part owns its config model and this module composes them: the policy table
(arena/policies/config.py), the learner and its schedule (arena/learners/config.py,
arena/learners/schedule.py), the runner (arena/runner.py), and under ``train:`` the loop's own
settings (:class:`TrainCore`) beside one section per component of the loop (a warm start, evals,
a league...: arena/loop/components/, mounted as ``train.<name>``); the game's settings are the
game's own ``config_type``. Errors are :class:`arena.core.errors.ConfigError`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from arena.core.errors import ConfigError, format_validation_error
from arena.core.registry import UnknownName, game_class
from arena.learners.config import LearnerConfig
from arena.learners.schedule import JointConfig, ScheduleConfig
from arena.loop.components import COMPONENTS
from arena.loop.compose import (  # noqa: F401 - default_config_path and duplicate_key re-exported
    Layer, default_config_path, duplicate_key, file_layers, merge, merged, parse_yaml,
)
from arena.loop.components.evals import set_path
from arena.loop.components.loggers import resolved_config  # noqa: F401 - re-exported
from arena.policies.config import POLICY_KINDS, ModelPolicySpec, PolicySpec, shorthand_policy
from arena.runner import RunnerSection


class GameSection(BaseModel):
    """The game to play: its registry name and its validated settings."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(description="Registered game name ('spy') or 'module:Class'.")
    settings: BaseModel = Field(description="The game's own config model, validated.")

    @property
    def cls(self) -> Any:
        return game_class(self.name)

    def make_env(self, **kwargs: Any) -> Any:
        return self.cls(self.settings, **kwargs)


_NOTED: set[str] = set()


class TrainCore(BaseModel):
    """The training loop's own settings; each component's section is mounted beside them (:data:`TrainConfig`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    steps: int = Field(default=100, ge=1, description="Training steps.")
    games_per_step: int = Field(default=128, ge=1, description="Games played per step.")
    seed: int = Field(default=0, ge=0, description="Seeds rollouts, sampling and initialisation.")
    run_dir: str | None = Field(default=None, description="Where checkpoints, metrics and plots go (default runs/<game>).")
    checkpoint_every: int = Field(default=5, ge=1, description="Steps between checkpoints.")
    keep_checkpoints: int = Field(default=2, ge=1, description="Newest checkpoints kept on disk.")
    schedule: ScheduleConfig = Field(default_factory=JointConfig, description="Which phases train at each step (rule: joint | cycle | hysteresis | progress).")
    plot: bool = Field(default=True, description="Draw the run's curves to PNG at the end.")

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, value: Any) -> Any:
        """Old flat keys (``train.sync_canary_max_gap``) into their component's section, one note each."""
        if not isinstance(value, dict):
            return value
        value = dict(value)
        for component in COMPONENTS:
            for note in component.migrate(value):
                if note not in _NOTED:  # one line per old key and process (a config is validated more than once)
                    _NOTED.add(note)
                    print(f"note: {note}; the old key goes in arena 0.3 (CHANGELOG.md)", file=sys.stderr)
        return value


def _mounted(component: Any) -> tuple[Any, Any]:
    """``train.<name>``: a component's section as a field of :data:`TrainConfig`."""
    kw: dict[str, Any] = {"description": component.section_doc}
    if component.key:
        kw["alias"] = component.key
    if component.section_default is not None:
        return component.section, Field(default_factory=component.section_default, **kw)
    return component.section, Field(default=None, **kw)


#: The training loop: :class:`TrainCore`'s settings plus one section per component (arena/loop/components/).
TrainConfig = create_model(
    "TrainConfig", __base__=TrainCore, __doc__="The training loop: its own settings and one section per component.",
    **{c.name: _mounted(c) for c in COMPONENTS if c.section is not None},  # type: ignore[call-overload]
)


class PlaySection(BaseModel):
    """Defaults for ``python -m arena.play``."""

    model_config = ConfigDict(extra="forbid")

    episodes: int = Field(default=1, ge=1, description="Games to play.")
    seed: int = Field(default=0, ge=0, description="Seed of the first game; game i uses seed + i.")
    bot: str = Field(default="default", description="Scripted bot for every seat with --policy scripted.")


class ArenaConfig(BaseModel):
    """A whole run: one section per component."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    game: GameSection
    policies: dict[str, Any] = Field(
        default_factory=lambda: {"learner": ModelPolicySpec(trainable=True)},
        description="Policy name -> spec (kind: model | reward_model | scripted | human).",
    )
    seats: dict[str, str] = Field(
        default_factory=dict,
        description="Seat-name patterns (fnmatch) -> policy name (or 'human', 'scripted:<bot>'); first match wins. "
        "Default: every seat plays the trainable policy.",
    )
    runner: RunnerSection = Field(default_factory=RunnerSection)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    play: PlaySection = Field(default_factory=PlaySection)

    @property
    def trainable(self) -> str | None:
        """Name of the (first) trainable policy, if any: the primary one when several are trained."""
        names = self.trainables
        return names[0] if names else None

    @property
    def trainables(self) -> list[str]:
        """Names of every trainable policy, in the order the config lists them."""
        return [n for n, p in self.policies.items() if isinstance(p, ModelPolicySpec) and p.trainable]

    def learner_for(self, name: str) -> LearnerConfig:
        """The learner section of trainable policy ``name``: the run's ``learner`` with the policy's
        ``learner:`` changes (top-level keys replace the run's). Raises pydantic's ValidationError."""
        spec = self.policies[name]
        if not isinstance(spec, ModelPolicySpec) or not spec.learner:
            return self.learner
        return LearnerConfig.model_validate(self.learner.model_dump(by_alias=True) | spec.learner)

    @property
    def run_dir(self) -> str:
        if self.train.run_dir:
            return self.train.run_dir
        name = str(self.game.cls.metadata.get("name", self.game.name))  # e.g. sealed_bid_v0 -> runs/sealed_bid
        return "runs/" + re.sub(r"_v\d+$", "", name)

    def policy_spec(self, name: str) -> PolicySpec:
        spec = self.policies.get(name) or shorthand_policy(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def seat_table(self) -> dict[str, str]:
        """``seats``, or every seat on the trainable (else the only) policy."""
        if self.seats:
            return dict(self.seats)
        default = self.trainable or next(iter(self.policies))
        return {"*": default}

def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    bad = set_path(raw, dotted.split("."), value)
    if bad is not None:
        raise ConfigError(f"--set {dotted}: {bad!r} is not a section")


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. game.n_players=4")
        # ``key=`` is the empty string (YAML would read it as null; ``key=null`` says that explicitly).
        try:
            value = parse_yaml(text) if text.strip() else ""
        except ConfigError as e:
            raise ConfigError(f"--set {key.strip()}: {e}") from None
        except yaml.YAMLError:
            value = text
        twice = duplicate_key(text) if text.strip() else None
        if twice is not None:
            raise ConfigError(f"--set {key.strip()}: {twice[2]!r} is given twice; give each key once")
        _set_path(raw, key.strip(), value)
    return raw


def parse_config(raw: Any, origin: str = "config") -> ArenaConfig:
    """Validate a loaded mapping; raises :class:`ConfigError` with one line."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: expected a mapping of sections, got {type(raw).__name__}")
    raw = dict(raw)
    game_raw = raw.get("game")
    if not isinstance(game_raw, dict) or "name" not in game_raw:
        raise ConfigError(f"{origin}: game.name: missing (e.g. 'game: {{name: spy}}')")
    game_raw = dict(game_raw)
    name = game_raw.pop("name")
    try:
        cls = game_class(str(name))
    except UnknownName as e:
        raise ConfigError(f"{origin}: game.name: {e}") from None
    try:
        settings = cls.config_type.model_validate(game_raw)
    except ValidationError as e:
        raise ConfigError(f"{origin}: {format_validation_error(e, 'game')}") from None
    raw["game"] = GameSection(name=str(name), settings=settings)
    _apply_training_defaults(raw, cls)
    if "policies" in raw:
        raw["policies"] = _parse_policies(raw["policies"], origin)
    try:
        cfg = ArenaConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{origin}: {format_validation_error(e)}") from None
    from arena.loop.checks import check_against_game

    check_against_game(cfg, origin)
    return cfg




def _apply_training_defaults(raw: dict[str, Any], cls: Any) -> None:
    """Put the game's training section under the YAML's (the YAML wins, key by key)."""
    defaults: dict[str, Any] = {k: dict(v) for k, v in getattr(cls, "training_defaults", {}).items()}
    phases = tuple(getattr(cls, "phases", ()) or ())
    learner = defaults.setdefault("learner", {})
    if "estimators" not in learner and phases:
        # One baseline per (phase, role) over the step's games: it works for one-seat
        # phases too, where a group per episode would hold a single turn.
        learner["estimators"] = {p: {"name": "grpo", "group_by": ["phase", "role"]} for p in phases}
    for section, values in defaults.items():
        if section in ("learner", "train") and values:
            user = raw.get(section)
            if user is None or isinstance(user, dict):
                if section == "learner" and isinstance(user, dict) and "estimators" in user:
                    values = {k: v for k, v in values.items() if k != "estimators"}  # estimators replace, not merge
                raw[section] = merge(values, user or {})


def _parse_policies(table: Any, origin: str) -> dict[str, PolicySpec]:
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{origin}: policies: expected a mapping of policy names to specs, e.g. "
                          "'policies: {learner: {model: smollm2-135m, trainable: true}}'")
    out: dict[str, PolicySpec] = {}
    for name, spec in table.items():
        spec = dict(spec or {}) if isinstance(spec, dict) or spec is None else spec
        if not isinstance(spec, dict):
            raise ConfigError(f"{origin}: policies.{name}: expected a mapping (got {spec!r})")
        kind = spec.get("kind", "model")
        if kind not in POLICY_KINDS:
            raise ConfigError(f"{origin}: policies.{name}.kind: must be one of {', '.join(POLICY_KINDS)} (got {kind!r})")
        try:
            out[str(name)] = POLICY_KINDS[kind].model_validate(spec)  # type: ignore[assignment]
        except ValidationError as e:
            raise ConfigError(f"{origin}: {format_validation_error(e, f'policies.{name}')}") from None
    return out


def load_config(path: str | Path, overrides: list[str] | None = None) -> ArenaConfig:
    """Read a YAML file and the files it ``extends``, apply ``--set`` overrides, validate (arena/loop/compose.py:
    the merge order and the bounds)."""
    layers, shown = config_layers(path)
    return parse_config(apply_overrides(merged(layers), overrides or []), shown)


def config_layers(path: str | Path) -> tuple[list[Layer], str]:
    """The layers of a config file (those it ``extends``, then its own) and its name as the user wrote it."""
    given = str(path)
    path = default_config_path(given) or Path(path)
    shown = given if given.startswith("games/") else str(path)  # errors name the path as the user wrote it
    return file_layers(path, shown), shown
