"""Stop rules (``train.stop_when``): end a run early once an evaluation's metric is good enough, or
has stopped improving.

    train:
      evals: [{name: kuhn, kind: exact, every: 5}]
      stop_when:
        - {metric: kuhn/exploitability, "<=": 0.05}             # good enough
        - {metric: kuhn/exploitability, patience: 4, mode: min}  # no new best in 4 evaluations

Fields of a rule
    ``metric``: an evaluation's metric as logged, ``<eval name>/<metric>`` (the ``eval/`` prefix of
    the logged key may be written too): ``kuhn/exploitability``, ``held_out/success_rate``,
    ``held_out/success_rate_lo``. A name that no evaluation logs is a one-line ConfigError at start-up.
    Exactly one of:

    * ``"<="``: stop once a logged value is at most this (a loss, an exploitability);
    * ``">="``: stop once a logged value is at least this (a win rate);
    * ``patience``: stop once this many evaluations in a row brought no improvement on the best
      value so far; ``mode`` (required with patience): ``min`` (lower is better) or ``max``;
      ``min_delta`` (default 0): an improvement must beat the best by more than this. The first
      evaluation (step 0, the untrained model) sets the first best; a NaN is never an improvement.

When
    After every logged row that holds the metric (step 0 included); the first rule that fires
    stops the run (:func:`decide`, a pure function of the values logged so far). The trainer then
    checkpoints that step, prints ``stopped at step S: <reason>`` and writes
    ``<run_dir>/stopped.json`` (``step``, ``rule``, ``metric``, ``value``, ``reason``). On
    ``--resume`` the rows kept in metrics.jsonl are read back, so patience counts across the break.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.loop.component import Component


class StopRule(BaseModel):
    """One rule of ``train.stop_when`` (arena/loop/components/stop.py)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    metric: str = Field(description="'<eval name>/<metric>' as train.evals logs it (eval/<name>/<metric>), "
                        "e.g. kuhn/exploitability.")
    at_most: float | None = Field(default=None, alias="<=", description="Stop once a logged value is <= this.")
    at_least: float | None = Field(default=None, alias=">=", description="Stop once a logged value is >= this.")
    patience: int | None = Field(default=None, ge=1, description="Stop after this many evaluations in a row "
                                 "without a new best (needs mode).")
    mode: Literal["min", "max"] | None = Field(default=None, description="With patience: min (lower is better) or max.")
    min_delta: float = Field(default=0.0, ge=0.0, description="With patience: an improvement beats the best by "
                             "more than this.")

    @model_validator(mode="after")
    def _one_kind(self) -> StopRule:
        for name, value in (('"<="', self.at_most), ('">="', self.at_least), ("min_delta", self.min_delta)):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name}: {value} never fires; give a finite number")
        given = [k for k, v in (('"<="', self.at_most), ('">="', self.at_least), ("patience", self.patience))
                 if v is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of \"<=\", \">=\", patience (got {', '.join(given) or 'none'})")
        if (self.patience is None) != (self.mode is None):
            raise ValueError("mode (min or max) goes with patience, and only with it")
        if self.patience is None and self.min_delta:
            raise ValueError("min_delta goes with patience only")
        return self

    @property
    def key(self) -> str:
        """The logged key: ``eval/<name>/<metric>``."""
        return "eval/" + self.metric.removeprefix("eval/")


@dataclass(frozen=True)
class Stop:
    """Why a run stops: which rule (its index in ``train.stop_when``), on which value."""

    rule: int
    metric: str
    value: float
    reason: str


def track_best(values: Sequence[float], mode: str, min_delta: float) -> tuple[int, float]:
    """``(evaluations since the best, the best)`` over ``values`` in order: a value is a new best when it
    beats the best so far by more than ``min_delta`` (lower for ``min``, higher for ``max``); NaN never is."""
    best, since = math.nan, 0
    for v in values:
        better = v < best - min_delta if mode == "min" else v > best + min_delta
        if not math.isnan(v) and (math.isnan(best) or better):
            best, since = v, 0
        else:
            since += 1
    return since, best


def evals_since_best(values: Sequence[float], mode: str, min_delta: float = 0.0) -> int:
    """Evaluations after the one that set the best value (:func:`track_best`)."""
    return track_best(values, mode, min_delta)[0]


def decide(rules: Sequence[StopRule], history: Mapping[str, Sequence[float]]) -> Stop | None:
    """The first rule that fires on ``history`` (logged key -> its values, in evaluation order), else None.

    A threshold rule looks at the latest value; a patience rule at the evaluations since the best."""
    for i, rule in enumerate(rules):
        values = history.get(rule.key) or ()
        if not values:
            continue
        last = values[-1]
        name = rule.key.removeprefix("eval/")
        if rule.at_most is not None and last <= rule.at_most:
            return Stop(i, name, last, f"{name} = {last:.6g} <= {rule.at_most:g} (train.stop_when.{i})")
        if rule.at_least is not None and last >= rule.at_least:
            return Stop(i, name, last, f"{name} = {last:.6g} >= {rule.at_least:g} (train.stop_when.{i})")
        if rule.patience is None:
            continue
        since, best = track_best(values, "max" if rule.mode == "max" else "min", rule.min_delta)
        if since >= rule.patience:
            return Stop(i, name, last, f"{name}: no new best ({rule.mode}) in {rule.patience} evaluations; best "
                        f"{best:.6g}, last {last:.6g} (train.stop_when.{i})")
    return None


class StopWatch:
    """The run's stop rules and the values logged so far (the trainer feeds it every row)."""

    def __init__(self, rules: Sequence[StopRule], metrics_path: Path | None = None):
        """``metrics_path``: a resumed run's metrics.jsonl, whose rows are read back first."""
        self.rules = list(rules)
        self.history: dict[str, list[float]] = {r.key: [] for r in self.rules}
        if metrics_path is not None and metrics_path.is_file():
            for line in metrics_path.read_text().splitlines():
                try:
                    self.add(json.loads(line))
                except (ValueError, TypeError):  # a line cut short by a kill
                    continue

    def add(self, row: Mapping[str, Any]) -> None:
        for key, values in self.history.items():
            if key in row:
                value = row[key]
                values.append(math.nan if value is None else float(value))

    def update(self, row: Mapping[str, Any]) -> Stop | None:
        """Add ``row``; the rule that fires, if any, when the row holds one of the rules' metrics."""
        if not any(key in row for key in self.history):
            return None
        self.add(row)
        return decide(self.rules, self.history)

    def record(self, stop: Stop, step: int, run_dir: Path) -> str:
        """Write ``<run_dir>/stopped.json``; the line to print."""
        (run_dir / "stopped.json").write_text(json.dumps({"step": step, "rule": stop.rule, "metric": stop.metric,
                                                          "value": stop.value, "reason": stop.reason}, indent=2))
        return f"stopped at step {step}: {stop.reason}"


# ------------------------------------------------------------------ start-up check
def eval_metric_names(cfg: Any, spec: Any, origin: str = "config") -> set[str] | None:
    """What ``eval/<spec.name>/...`` will hold (without the prefix), from the game with no model: an exact
    evaluation's metrics of the uniform policy, or a played one's metrics over three example games with
    the ``_lo`` / ``_hi`` bounds; None when the game cannot tell here (it is then checked when run)."""
    import fnmatch

    from arena.loop.components.evals import eval_settings
    from arena.loop.example_games import example_episode

    env = cfg.game.cls(eval_settings(cfg.game.cls, cfg.game.settings, spec, origin))
    if spec.kind == "exact":
        try:
            values = env.policy_metrics(lambda qs: [[1.0 / len(q.actions)] * len(q.actions) for q in qs])
        except ValueError:  # too large to enumerate: the evaluation itself says so
            return None
        return set(values or {})
    from arena.stats.heldout import per_episode

    names: set[str] = set()
    for seed in range(3):
        episode = example_episode(env, seed)
        if episode is None:
            return None
        names |= {k.removeprefix("game/") for k in per_episode(episode)}
    if spec.metrics is not None:
        names = {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in spec.metrics)}
    return names | {f"{n}_{b}" for n in names for b in ("lo", "hi")}


def check_stop_when(cfg: Any, origin: str = "config") -> None:
    """Each rule's metric is one an evaluation of ``train.evals`` logs: else one ConfigError line naming
    the rule, the value and what is valid."""
    from arena.core.errors import ConfigError

    rules = cfg.train.stop_when
    if not rules:
        return
    specs = {s.name: s for s in cfg.train.evals}
    known: dict[str, set[str] | None] = {}
    for i, rule in enumerate(rules):
        where = f"{origin}: train.stop_when.{i}.metric"
        name, _, metric = rule.metric.removeprefix("eval/").partition("/")
        if name not in specs:
            valid = ", ".join(sorted(specs)) or "none (add train.evals first)"
            raise ConfigError(f"{where}: {rule.metric!r} names no evaluation; write '<eval name>/<metric>' with an "
                              f"evaluation of train.evals: {valid}")
        if name not in known:
            known[name] = eval_metric_names(cfg, specs[name], origin)
        names = known[name]
        if names is not None and metric not in names:
            shown = sorted(f"{name}/{n}" for n in names)
            listed = ", ".join(shown[:16]) + (f", ... ({len(shown)} in all)" if len(shown) > 16 else "")
            problem = f"logs no metric {metric!r}" if metric else "needs a metric after it ('<eval name>/<metric>')"
            raise ConfigError(f"{where}: evaluation {name!r} {problem}; valid: {listed}")


class StopWhen(Component):
    """``train.stop_when``: the run's stop rules, fed every logged row (rank 0)."""

    name = "stop_when"
    section = list[StopRule]
    section_default = list
    section_doc = ("Stop early (arena/loop/components/stop.py): rules on metrics train.evals logs, {metric: "
                   "'<eval>/<metric>', '<=': x} or '>=': x, or {metric, patience: N, mode: min|max, min_delta}; the "
                   "first to fire checkpoints, prints why and writes <run_dir>/stopped.json; []: run all steps.")

    def __init__(self, rules: Sequence[StopRule], run_dir: Path):
        self.rules, self.run_dir = list(rules), run_dir
        self.watch: StopWatch | None = None
        self.loop: Any = None

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        check_stop_when(cfg, origin)

    @classmethod
    def build(cls, plan: Any, parts: Any) -> StopWhen | None:
        return cls(plan.cfg.train.stop_when, parts.run_dir) if plan.cfg.train.stop_when else None

    def start(self, loop: Any) -> dict[str, float]:
        """The watch, with a resumed run's logged values read back."""
        self.loop = loop
        if loop.dist.main:
            (self.run_dir / "stopped.json").unlink(missing_ok=True)
        self.watch = StopWatch(self.rules, loop.metrics_path if loop.step > 0 else None)
        return {}

    def should_stop(self, row: dict[str, Any]) -> str | None:
        stop = self.watch.update(row) if self.watch is not None else None
        if stop is None:
            return None
        line = self.watch.record(stop, self.loop.step, self.run_dir)  # type: ignore[union-attr]
        print(line, flush=True)
        return line
