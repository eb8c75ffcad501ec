"""YAML -> validated pydantic config. Every mistake is one line naming the field.

A config file has one section per component. ``game`` names the game and
carries its settings, which the game's own ``config_type`` validates, so a typo
in ``games/spy/spy.yaml`` is reported as ``game.mask_ratio`` with the bad value and
what would be valid, before any model is loaded. ``--set a.b=value`` overrides
any key; the value is parsed as YAML (``--set game.n_players=4``).
Each part owns its config model and this module composes them: the policy table
(arena/policies/config.py), the learner and its schedule (arena/learners/config.py,
arena/learners/schedule.py), the runner (arena/runner.py), evaluations
(arena/loop/evals.py) and the league (arena/loop/league.py); the game's settings
are the game's own ``config_type``. Errors are :class:`arena.core.errors.ConfigError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from arena.core.errors import ConfigError, format_validation_error
from arena.core.registry import UnknownName, game_class
from arena.loop.evals import EvalSpec, check_names, set_path
from arena.loop.league import LeagueConfig
from arena.loop.rollouts import AsyncConfig
from arena.loop.stop import StopRule
from arena.loop.warm_start import WarmStartConfig, parse_warm_start
from arena.runner import RunnerSection
from arena.learners.config import LearnerConfig
from arena.learners.schedule import JointConfig, ScheduleConfig
from arena.policies.config import POLICY_KINDS, ModelPolicySpec, PolicySpec, shorthand_policy
from arena.loop.checks import (  # noqa: F401 - the cross-checks live there; re-exported under their old home
    _example_episode, check_against_game, check_bots, check_eval_metrics, check_models, check_model_name,
)


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


class TrainConfig(BaseModel):
    """The training loop."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=100, ge=1, description="Training steps.")
    games_per_step: int = Field(default=128, ge=1, description="Games played per step.")
    seed: int = Field(default=0, ge=0, description="Seeds rollouts, sampling and initialisation.")
    run_dir: str | None = Field(default=None, description="Where checkpoints, metrics and plots go (default runs/<game>).")
    checkpoint_every: int = Field(default=5, ge=1, description="Steps between checkpoints.")
    keep_checkpoints: int = Field(default=2, ge=1, description="Newest checkpoints kept on disk.")
    schedule: ScheduleConfig = Field(default_factory=JointConfig, description="Which phases train at each step (rule: joint | cycle | hysteresis | progress).")
    plot: bool = Field(default=True, description="Draw the run's curves to PNG at the end.")
    loggers: list[str] = Field(
        default_factory=lambda: ["tensorboard"], description="Experiment trackers besides metrics.jsonl: any of "
        "tensorboard, wandb (offline), mlflow (a file store in the run folder); [] for none (arena/loop/loggers.py).",
    )
    league: LeagueConfig = Field(default_factory=LeagueConfig, description="Opponent pool and rated matches (off by default).")
    async_: AsyncConfig | None = Field(
        default=None, alias="async", description="Async rollouts: the next steps' games are played while the learner "
        "updates, with weights at most max_staleness versions old (arena/loop/rollouts.py); null: synchronous.",
    )
    save_episodes: bool = Field(
        default=True, description="Save each step's episodes with the learner's advantages to <run_dir>/episodes/ "
        "(gzip JSONL, read by python -m arena.view).",
    )
    episodes_max_mb: float = Field(default=200.0, gt=0, description="Stop saving episodes once <run_dir>/episodes/ holds this many MB.")
    sync_canary_max_gap: float | Literal["auto"] | None = Field(
        default="auto", description="After every weight sync the generator and the learner score the same "
        "completions; a mean |logprob| gap (nats/token) above this stops the run as stale weights. auto: 1e-3 for "
        "float32 generators, 0.15 for bfloat16/float16 (measured, arena/loop/canary.py); null: off.",
    )
    sync_canary_samples: int = Field(
        default=2, ge=1, description="Completions the weight-sync canary scores (the step's shortest trainable "
        "turns; each costs a forward pass on both sides: about 10 s a sample for the built-in model on 2 CPU cores).",
    )
    warm_start: WarmStartConfig | None = Field(
        default=None, description="Supervised fine-tuning on demonstrations before self-play (source: bots | episodes "
        "| pairs; arena/loop/warm_start.py); null: none.",
    )
    evals: list[EvalSpec] = Field(
        default_factory=list, description="Evaluations inside training on held-out games (arena/loop/evals.py): at step 0 "
        "(the untrained model), every 'every' steps and after the last step, logged as eval/<name>/<metric> with a "
        "95% interval.",
    )
    respond_every: int = Field(
        default=1, ge=1, description="Steps between recomputing the bots that respond to the trainable policy as it "
        "is now (scripted:br:current, as a seat or a league bot; arena/loop/respond.py): before the games of step s "
        "when (s - 1) % respond_every == 0.",
    )
    exact_descent: bool = Field(
        default=False, description="Exploitability descent, full width (Lockhart et al., 2019; arena/loop/descent.py): "
        "each step trains on every information state of the game, one sample per legal action with advantage "
        "c(I) pi(a|I) (q(I,a) - v(I)) against the exact best response to the policy, instead of played games. "
        "Two-player zero-sum OpenSpiel games with action_mode: score; false: the step's games.",
    )
    descent_weighting: Literal["policy", "natural"] = Field(
        default="policy", description="train.exact_descent's advantages (arena/games/openspiel/descent.py): policy, "
        "ED's c(I) pi(a|I) (q - v) (Lockhart et al.); natural, c(I) (q - v), the natural-gradient direction of "
        "softmax policies, which does not vanish as the policy saturates.",
    )
    descent_bound: float = Field(
        default=0.0, ge=0.0, lt=0.5, description="train.exact_descent: an action's advantage is set to 0 where it "
        "would push its probability above 1 - bound or below bound (arena/games/openspiel/descent.py bounded); "
        "0: off (Lockhart et al. have none).",
    )
    stop_when: list[StopRule] = Field(
        default_factory=list, description="Stop early (arena/loop/stop.py): rules on metrics train.evals logs, "
        "{metric: '<eval>/<metric>', '<=': x} or '>=': x, or {metric, patience: N, mode: min|max, min_delta}; the "
        "first to fire checkpoints, prints why and writes <run_dir>/stopped.json; []: run all steps.",
    )

    @field_validator("loggers", mode="before")
    @classmethod
    def _known_loggers(cls, value: Any) -> Any:
        from arena.loop.loggers import check_names

        if isinstance(value, str):  # --set train.loggers=wandb
            value = [value]
        return check_names(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else value

    @field_validator("warm_start", mode="before")
    @classmethod
    def _warm_start(cls, value: Any) -> Any:
        return parse_warm_start(value)

    @field_validator("evals")
    @classmethod
    def _unique_eval_names(cls, value: list[EvalSpec]) -> list[EvalSpec]:
        check_names(value)
        return value

    @field_validator("sync_canary_max_gap", mode="before")
    @classmethod
    def _canary_bound(cls, value: Any) -> Any:
        if value is None or value == "auto":
            return value
        try:
            bound = float(value)
        except (TypeError, ValueError):
            bound = float("nan")
        if not bound > 0:
            raise ValueError("must be a positive number of nats per token, 'auto' or null (off)")
        return bound


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
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
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
    check_against_game(cfg, origin)
    return cfg


def _merge(base: Any, top: Any) -> Any:
    if isinstance(base, dict) and isinstance(top, dict):
        return {k: _merge(base.get(k), top[k]) if k in base else top[k] for k in top} | {
            k: v for k, v in base.items() if k not in top
        }
    return top


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
                raw[section] = _merge(values, user or {})


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


def default_config_path(name: str) -> Path | None:
    """A registered game's own YAML (``<its package>/<name>.yaml``) when ``name`` is a game, not a file.

    ``spy`` and ``games/spy.yaml`` (when no such file exists) both name ``arena/games/spy/spy.yaml``;
    ``games/<path>`` names ``<path>`` inside the installed :mod:`arena.games` (the built-in configs'
    documented paths, e.g. ``games/openspiel/kuhn.yaml``), from a checkout and from an installed wheel.
    """
    given = Path(name)
    if given.exists():
        return None
    if not given.is_absolute() and len(given.parts) > 2 and given.parts[0] == "games":
        import arena.games

        shipped = Path(arena.games.__file__).parent.joinpath(*given.parts[1:])
        return shipped if shipped.is_file() else None
    if given.suffix in (".yaml", ".yml") and given.parent.name == "games":
        name = given.stem  # games/<name>.yaml: the game's own YAML
    elif "/" in name or name.endswith((".yaml", ".yml")):
        return None
    import inspect

    try:
        cls = game_class(name)
    except UnknownName:
        return None
    candidate = Path(inspect.getfile(cls)).parent / f"{name}.yaml"
    return candidate if candidate.is_file() else None


def duplicate_key(text: str) -> tuple[int, str, str] | None:
    """The first key given twice in one mapping of a YAML text: (its second line, the dotted path of the
    mapping, the key); None when every key is unique (PyYAML itself keeps the last one silently)."""
    def walk(node: yaml.Node, where: str) -> tuple[int, str, str] | None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if isinstance(key, yaml.ScalarNode) and name in seen:
                    return key.start_mark.line + 1, where, name
                seen.add(name)
                found = walk(value, f"{where}.{name}" if where else name)
                if found:
                    return found
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                found = walk(item, f"{where}.{i}")
                if found:
                    return found
        return None

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None  # safe_load has already said what is wrong
    return walk(root, "") if root is not None else None


def load_config(path: str | Path, overrides: list[str] | None = None) -> ArenaConfig:
    """Read a YAML file, apply ``--set`` overrides, validate."""
    given = str(path)
    path = default_config_path(given) or Path(path)
    shown = given if given.startswith("games/") else str(path)  # errors name the path as the user wrote it
    try:
        text = path.read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{shown}: is a directory, not a config file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{shown}: not UTF-8 text (byte {e.start}); a config is a YAML file") from None
    except OSError as e:
        raise ConfigError(f"{shown}: cannot read the config file ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line, even for a NUL byte
        raise ConfigError(f"{shown}:{where} not valid YAML ({problem})") from None
    twice = duplicate_key(text)
    if twice is not None:
        line, where, key = twice
        raise ConfigError(f"{shown}: line {line}: {where + ': ' if where else ''}{key!r} is given twice; YAML would "
                          "keep the last silently (for seats: a seat given two policies); give each key once")
    raw = raw if raw is not None else {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{shown}: expected a mapping of sections, got {type(raw).__name__}")
    return parse_config(apply_overrides(raw, overrides or []), shown)
