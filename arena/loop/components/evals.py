"""Evaluation inside training (``train.evals``): held-out games played with the current weights.

Each entry of ``train.evals`` names an evaluation::

    train:
      evals:
        - {name: held_out, every: 2, games: 8, set: {game.split: eval, game.task_types: held_out},
           metrics: [success_rate, "success/*"]}

When
    At step 0 (before any update: the untrained base model), at every step
    that is a multiple of ``every`` (default ``train.checkpoint_every``), and
    after the last step of the run (``train.steps`` or ``--max-steps``).

Exact evaluations (``kind: exact``)
    Nothing is played: the game computes metrics from the seats' action
    probabilities (``LLMGame.policy_metrics``; OpenSpiel games give NashConv
    and exploitability with the uniform and CFR+ reference points, see
    arena/games/openspiel/exact.py and arena/loop/exact.py), logged as
    ``eval/<name>/<metric>`` with no interval (the values are exact). ``games``
    and ``metrics`` are unused; ``set`` applies. Where the game can (OpenSpiel),
    ``exploitability_average`` / ``nash_conv_average`` are those of the AVERAGE
    policy of the run so far, as fictitious play averages it (arena/games/openspiel/exact.py
    ``average_policy``): the played policies of every evaluation of this entry up to
    and including this one (step 0's base model included), equal weights, each
    information state's rows weighted by the player's own reach probability. Their
    tables are kept in the checkpoint (``state.json``), so a resumed run averages the
    same policies.

Which games
    The game with the run's settings plus ``set`` (game keys only, validated
    against the game's config model at start-up), on the held-out seeds of
    ``arena.stats.heldout``, ``2**40 + train.seed * 1_000_003 + i`` for ``i < games``:
    a range training never reaches, and the SAME games at every evaluation, so
    the points of one evaluation are paired across steps (the step-0 point is
    the untrained model on exactly these games).

How
    Through the run's own runner setup: the same policies and seat table, the
    trainable seats on the generation policy just after the step's weight
    sync, the same sampling settings, the game's cross-episode state read but
    never updated. No gradient; the global RNGs are saved and restored around
    it, so training (its metrics and parameters) is identical with evaluations
    on or off. Request seeds are the runner's per-turn seeds mixed with a hash
    of ``(train.seed, name, step)``, so an evaluation due after ``--resume``
    gives the numbers an uninterrupted run gives. Evaluation episodes are never
    trained on; with ``train.episodes.save`` they are written to
    ``<run_dir>/evals/<name>/step_<S>.jsonl.gz`` (gzip JSONL; ``arena.core.types.read_jsonl`` reads it).

What is logged
    In the step's row of metrics.jsonl (and TensorBoard): for each metric ``m``
    (a key of ``arena.stats.heldout.per_episode`` without its ``game/`` prefix:
    the game's episode metrics, ``invalid_turn_rate``, ``truncated_rate``,
    ``reward/<role>``, ``outcome/<role>``; fnmatch patterns allowed; default
    all), ``eval/<name>/<m>`` (the mean over the games that report it) and
    ``eval/<name>/<m>_lo``, ``_hi``: the 95% percentile-bootstrap interval of
    ``arena.stats.heldout.bootstrap``, resampling games with a seed from
    ``(train.seed, name, step)``. Also ``time/eval_s``. Several ranks: rank 0
    plays every evaluation game while the others wait at a barrier.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from arena.loop.component import Component, StepContext

NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class EvalSpec(BaseModel):
    """One evaluation run inside training (arena/loop/components/evals.py)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Name in the logged keys (eval/<name>/<metric>) and in <run_dir>/evals/<name>/.")
    kind: Literal["games", "exact"] = Field(default="games", description="games: play held-out games; exact: the "
                                            "game's exact metrics of the seats' policies, computed, not played "
                                            "(LLMGame.policy_metrics: exploitability of OpenSpiel games).")
    every: int | None = Field(default=None, ge=1, description="Steps between evaluations (default: "
                              "train.checkpoint_every); step 0 and the run's last step are always evaluated.")
    games: int = Field(default=8, ge=2, description="Held-out games per evaluation (the same seeds every time).")
    set: dict[str, Any] = Field(default_factory=dict, description="Game settings for these games, as "
                                "'game.<key>' -> value (dotted keys reach nested settings), over the run's own.")
    policy: str | None = Field(default=None, description="Every seat plays this policy instead of the seat table "
                               "(e.g. 'average': train.average's average policy); null: the seat table.")
    metrics: list[str] | None = Field(default=None, description="Metrics to log (episode metric names, "
                                      "invalid_turn_rate, truncated_rate, reward/<role>; fnmatch patterns); "
                                      "default: all of them.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError("must be letters, digits, '_' or '-' (it names log keys and a folder)")
        return value

    @field_validator("set")
    @classmethod
    def _game_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not str(key).startswith("game.") or str(key) == "game.name":
                raise ValueError(f"{key!r}: only game settings can be set here, as 'game.<key>' (not game.name)")
        return value

    @field_validator("metrics")
    @classmethod
    def _some_metrics(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("name at least one metric, or leave it out for all")
        return value


def check_names(evals: Sequence[EvalSpec]) -> Sequence[EvalSpec]:
    """Names are unique (they key the logs)."""
    names = [e.name for e in evals]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"two evaluations are named {name!r}; names must be unique")
    return evals


def set_path(raw: dict[str, Any], keys: list[str], value: Any) -> str | None:
    """Set ``raw[k0][k1]...[kn] = value``, making missing sections; returns the key that holds a value
    where a section is needed (nothing is set then), else ``None``."""
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            return key
        node = child
    node[keys[-1]] = value
    return None


def eval_settings(game_cls: Any, settings: BaseModel, spec: EvalSpec, origin: str = "config") -> BaseModel:
    """The run's game settings with ``spec.set`` on top, validated by the game's own config model;
    a bad key or value is a one-line :class:`~arena.core.errors.ConfigError` naming the field."""
    from arena.core.errors import ConfigError, format_validation_error

    raw = settings.model_dump(by_alias=True)
    for dotted, value in spec.set.items():
        bad = set_path(raw, dotted.removeprefix("game.").split("."), value)
        if bad is not None:
            raise ConfigError(f"{origin}: train.evals.{spec.name}.set.{dotted}: {bad!r} is not a section of the game's settings")
    try:
        return game_cls.config_type.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{origin}: {format_validation_error(e, f'train.evals.{spec.name}.set.game')}") from None


def check_evals(cfg: Any, origin: str = "config") -> None:
    """Start-up check of every evaluation's game settings (before any model loads)."""
    from arena.core.errors import ConfigError
    from arena.core.game import LLMGame

    for spec in cfg.train.evals:
        eval_settings(cfg.game.cls, cfg.game.settings, spec, origin)
        extra = ["average"] if getattr(cfg.train, "average", None) is not None else []
        if spec.policy is not None and spec.policy not in [*cfg.policies, *extra]:
            raise ConfigError(f"{origin}: train.evals.{spec.name}.policy: unknown policy {spec.policy!r}; valid: "
                              f"{', '.join([*cfg.policies, *extra])}")
        if spec.kind == "exact" and cfg.game.cls.policy_metrics is LLMGame.policy_metrics:
            raise ConfigError(f"{origin}: train.evals.{spec.name}.kind: exact, but game {cfg.game.name!r} has no exact "
                              "metrics (LLMGame.policy_metrics; OpenSpiel games have them); use kind: games")


def check_exact_evals(cfg: Any, origin: str = "config") -> None:
    """``arena.train``'s start-up check that every exact evaluation can run on its game (an OpenSpiel game
    small enough to enumerate), before any model loads; not part of the config check, since ``arena.play``
    and ``arena.tournament`` run no evaluation."""
    for spec in cfg.train.evals:
        if spec.kind == "exact":
            settings = eval_settings(cfg.game.cls, cfg.game.settings, spec, origin)
            check_enumerable(cfg.game.cls(settings), f"{origin}: train.evals.{spec.name}.kind: exact")


class _Asked(Exception):
    """The game asked for action probabilities: it passed its own checks (e.g. its size)."""


def check_enumerable(env: Any, where: str) -> None:
    """A game whose exact metrics refuse this configuration (``policy_metrics`` raises ``ValueError``
    before it asks for any probability, e.g. an OpenSpiel game too large to enumerate) is one ConfigError
    line at start-up; the check stops at the game's first question, so it costs only the game's own checks."""
    from arena.core.errors import ConfigError

    def stop(queries: Any) -> list[list[float]]:
        raise _Asked

    try:
        env.policy_metrics(stop)
    except _Asked:
        return
    except ValueError as e:
        raise ConfigError(f"{where}: {' '.join(str(e).split())}") from None


def is_due(spec: EvalSpec, step: int, last: int, checkpoint_every: int) -> bool:
    """Step 0, every ``every`` steps, and the run's last step."""
    every = spec.every or checkpoint_every
    return step == 0 or step % every == 0 or step == last


def derived_seed(*parts: Any) -> int:
    """A 63-bit seed from its parts (stable across processes and Python versions)."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class ReseededPolicy:
    """A policy whose requests' seeds are mixed with a salt (the evaluation's (seed, name, step))."""

    def __init__(self, policy: Any, salt: int):
        self.policy, self.salt = policy, salt
        self.name = getattr(policy, "name", "policy")

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        mixed = [r.model_copy(update={"seed": derived_seed(self.salt, r.seed)}) for r in requests]
        return self.policy.generate(mixed)


def select(summary: Mapping[str, Mapping[str, float]], patterns: Sequence[str] | None) -> dict[str, str]:
    """Logged metric name -> summary key, for the metrics the patterns pick (all when None)."""
    names = {key.removeprefix("game/"): key for key in summary}
    if patterns is None:
        return names
    return {n: k for n, k in names.items() if any(fnmatch.fnmatchcase(n, p) for p in patterns)}


def eval_row(name: str, summary: Mapping[str, Mapping[str, float]], patterns: Sequence[str] | None) -> dict[str, float]:
    """``eval/<name>/<m>``, ``..._lo``, ``..._hi`` for the selected metrics."""
    row: dict[str, float] = {}
    for metric, key in sorted(select(summary, patterns).items()):
        s = summary[key]
        row |= {f"eval/{name}/{metric}": s["mean"], f"eval/{name}/{metric}_lo": s["low"],
                f"eval/{name}/{metric}_hi": s["high"]}
    return row


class TrainEvals(Component):
    """The run's evaluations: built once, played when due (at the run's start and after each step)."""

    name = "evals"
    section = Annotated[list[EvalSpec], AfterValidator(check_names)]
    section_default = list
    section_doc = ("Evaluations inside training on held-out games (arena/loop/components/evals.py): at step 0 (the "
                   "untrained model), every 'every' steps and after the last step, logged as eval/<name>/<metric> "
                   "with a 95% interval.")

    def __init__(self, cfg: Any, run_dir: Path, dist: Any, sampling: Any, policies: Mapping[str, Any] | None = None,
                 state: Any = None):
        """``sampling``: the run's (policy, phase) -> sampling table (``arena.loop.build.sampling_table``);
        ``policies`` and ``state``: the run's policy table and game state the hooks evaluate."""
        self.cfg, self.run_dir, self.dist, self.sampling = cfg, run_dir, dist, sampling
        self.policies, self.game_state = policies or {}, state
        self.specs = list(cfg.train.evals)
        self.settings = {s.name: eval_settings(cfg.game.cls, cfg.game.settings, s) for s in self.specs}
        self.past: dict[str, list[Any]] = {s.name: [] for s in self.specs if s.kind == "exact"}  # played tables

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        if cfg.train.evals:
            check_evals(cfg, origin)
            check_eval_metrics(cfg, origin)

    @classmethod
    def build(cls, plan: Any, parts: Any) -> TrainEvals | None:
        if not plan.cfg.train.evals:
            return None
        return cls(plan.cfg, parts.run_dir, parts.dist, parts.sampling, parts.policies, parts.state)

    def start(self, loop: Any) -> dict[str, float]:
        """The untrained model, on the games every evaluation plays."""
        return self.run(0, loop.last_step, self.policies, self.game_state) if loop.step == 0 else {}

    def after_step(self, ctx: StepContext) -> dict[str, float]:
        return self.run(ctx.step, ctx.last, self.policies, self.game_state)

    def state_dict(self) -> dict[str, Any] | None:
        """The exact evaluations' past played tables (the average policy's members), for a checkpoint."""
        if not any(self.past.values()):
            return None
        return {name: [np.asarray(t).tolist() for t in tables] for name, tables in self.past.items()}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        for name, tables in (state or {}).items():
            if name in self.past:
                self.past[name] = [np.asarray(t, dtype=float) for t in tables]

    def due(self, step: int, last: int) -> list[EvalSpec]:
        return [s for s in self.specs if is_due(s, step, last, self.cfg.train.checkpoint_every)]

    def seeds(self, spec: EvalSpec) -> list[int]:
        from arena.stats.heldout import held_out_seeds

        return held_out_seeds(self.cfg.train.seed, spec.games)

    def run(self, step: int, last: int, policies: Mapping[str, Any], state: Any = None) -> dict[str, float]:
        """Play the evaluations due at ``step`` (rank 0) and return their row (empty elsewhere)."""
        from arena.core.distributed import barrier

        due = self.due(step, last)
        if not due:
            return {}
        row: dict[str, float] = {}
        if self.dist.main:
            t0 = time.perf_counter()
            for spec in due:
                row |= self.exact(spec, policies) if spec.kind == "exact" else self.play_games(spec, step, policies, state)
            row["time/eval_s"] = time.perf_counter() - t0
        barrier(self.dist)
        return row

    def seats(self, spec: EvalSpec) -> Any:
        """Who plays: the seat table, or ``spec.policy`` at every seat."""
        from arena.runner import SeatMap

        return SeatMap({"*": spec.policy} if spec.policy else self.cfg.seat_table())

    def exact(self, spec: EvalSpec, policies: Mapping[str, Any]) -> dict[str, float]:
        """The game's exact metrics of the current policies (arena/loop/exact.py), ``eval/<name>/<metric>``."""
        import torch

        from arena.loop.checkpoint import rng_state, set_rng_state
        from arena.loop.exact import exact_metrics

        saved = rng_state()
        try:
            with torch.no_grad():
                values = exact_metrics(self.cfg.game.cls(self.settings[spec.name]), policies, self.seats(spec).policy_for,
                                       self.sampling, self.past[spec.name])
        finally:
            set_rng_state(saved)
        return {f"eval/{spec.name}/{k}": v for k, v in sorted(values.items())}

    def play_games(self, spec: EvalSpec, step: int, policies: Mapping[str, Any], state: Any = None) -> dict[str, float]:
        """One evaluation: its games with the given policies, summarised; the global RNGs untouched."""
        import torch

        from arena.core.errors import ConfigError
        from arena.core.types import write_jsonl
        from arena.loop.checkpoint import rng_state, set_rng_state
        from arena.runner import Runner
        from arena.stats.heldout import summarise

        salt = derived_seed(self.cfg.train.seed, spec.name, step)
        wrapped = {name: ReseededPolicy(p, salt) for name, p in policies.items()}
        settings, game_cls = self.settings[spec.name], self.cfg.game.cls
        runner = Runner(lambda: game_cls(settings), wrapped, self.seats(spec), self.sampling,
                        num_envs=self.cfg.runner.num_envs, progress=self.cfg.runner.progress, state=state)
        saved = rng_state()
        try:
            with torch.no_grad():
                episodes = runner.play(self.seeds(spec))
        finally:
            set_rng_state(saved)
        summary = summarise(episodes, seed=salt % 2**32)
        if spec.metrics is not None:
            missing = [p for p in spec.metrics if not select(summary, [p])]
            if missing:
                known = ", ".join(sorted(select(summary, None)))
                raise ConfigError(f"train.evals.{spec.name}.metrics: no game reported {', '.join(map(repr, missing))}; "
                                  f"reported: {known}")
        if self.cfg.train.episodes.save:
            folder = self.run_dir / "evals" / spec.name
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"step_{step:06d}.jsonl.gz"  # prompts repeat turn to turn: 8 SpyRL games 98 kB -> 3.9 kB
            path.unlink(missing_ok=True)  # a resumed run replays the step: its file starts afresh
            write_jsonl(episodes, path)
        return eval_row(spec.name, summary, spec.metrics)


def check_eval_metrics(cfg: Any, origin: str = "config") -> None:
    """Every ``train.evals.<name>.metrics`` pattern picks a metric the evaluation's game reports (its
    summary keys over a few example games), at start-up rather than after the first evaluation."""
    from arena.core.errors import ConfigError
    from arena.loop.example_games import example_episode
    from arena.stats.heldout import per_episode

    for spec in cfg.train.evals:
        if not spec.metrics:
            continue
        env = cfg.game.cls(eval_settings(cfg.game.cls, cfg.game.settings, spec, origin))
        names: set[str] = set()
        episodes = [example_episode(env, seed) for seed in range(3)]
        if any(ep is None for ep in episodes):
            continue
        for ep in episodes:
            names |= {k.removeprefix("game/") for k in per_episode(ep)}
        missing = [p for p in spec.metrics if not any(fnmatch.fnmatchcase(n, p) for n in names)]
        if missing:
            raise ConfigError(f"{origin}: train.evals.{spec.name}.metrics: no metric matches "
                              f"{', '.join(map(repr, missing))}; the game reports: {', '.join(sorted(names))}")
