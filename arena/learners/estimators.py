"""Advantage estimators: registered pure functions with one signature, chosen by name in YAML.

    @register_estimator("grpo", options=GrpoOptions)
    def grpo_estimator(inp: EstimatorInput, options: GrpoOptions, state: dict) -> EstimatorOutput: ...

``inp`` is one phase's trainable turns of one step; ``options`` the estimator's
validated options model (``learner.estimators.<phase>.options``); ``state`` a
JSON-serialisable dict owned by the caller (one per phase, checkpointed with
the run) that stateful estimators mutate in place: RAE keeps
``state["values"] = {role: baseline}``; stateless ones ignore it.

Built in: ``grpo`` (group z-score), ``dr_grpo`` (no std), ``rae`` (SpyRL's role
baselines), ``obs_baseline`` (an EMA baseline per observation, for games whose information
states recur), ``lsp_solver`` (``R - V(q)``), ``lsp_challenger`` (reward minus the
mean over all the given turns), ``skill_sp_curriculum`` (GRPO on the top tasks
of each stream, :func:`top_per_stream`). Groups without reward variance carry no
signal; the group estimators drop them when ``inp.drop_zero_variance``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import Episode, Turn, observation_key
from arena.learners.advantages import (
    grpo, group_index, lsp_challenger, observation_advantages, role_advantages, zero_variance,
)


@dataclass(frozen=True)
class EstimatorInput:
    """One phase's trainable turns of one step, in batch order.

    ``rewards: (N,) float64``: each turn's reward, or the seat's trajectory return
    under trajectory credit. ``keys``: each turn's group keys (``turn.group``).
    ``games: (N,) long``: the turn's episode index in ``episodes``.
    ``drop_zero_variance``: whether group estimators drop groups without reward variance.
    """

    rewards: torch.Tensor
    keys: list[Mapping[str, str]]
    roles: list[str]
    games: torch.Tensor
    turns: list[Turn]
    episodes: Sequence[Episode]
    group_by: list[str]
    drop_zero_variance: bool = True


@dataclass(frozen=True)
class EstimatorOutput:
    """``advantages: (N,)`` (same dtype as the rewards); ``keep: (N,) bool``, False drops the turn;
    ``extras``: optional named facts per turn, merged into each sample's ``extras`` (AUSO's pass rate)."""

    advantages: torch.Tensor
    keep: torch.Tensor
    extras: list[dict[str, float]] | None = None


class NoOptions(BaseModel):
    """An estimator without options."""

    model_config = ConfigDict(extra="forbid")


EstimatorFn = Callable[[EstimatorInput, Any, dict[str, Any]], EstimatorOutput]


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator. ``requires``: capability flags the game must declare true (class attributes of
    ``arena.core.game_hooks.GameRules``, e.g. ``observations_recur``), checked at start-up by
    :func:`arena.learners.checks.check_game`."""

    name: str
    fn: EstimatorFn
    options: type[BaseModel]
    requires: tuple[str, ...] = ()


ESTIMATORS: dict[str, EstimatorSpec] = {}


def register_estimator(
    name: str, options: type[BaseModel] = NoOptions, requires: tuple[str, ...] = ()
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Register ``fn`` under ``name`` with its options model (``extra="forbid"``) and the game capabilities it
    ``requires``."""

    def decorate(fn: EstimatorFn) -> EstimatorFn:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} is already registered")
        ESTIMATORS[name] = EstimatorSpec(name, fn, options, tuple(requires))
        return fn

    return decorate


def get_estimator(name: str) -> EstimatorSpec:
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; known: {', '.join(sorted(ESTIMATORS))}")
    return ESTIMATORS[name]


def _keep_all(adv: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(adv, dtype=torch.bool)


def _group_estimate(inp: EstimatorInput, groups: torch.Tensor, scale: bool) -> EstimatorOutput:
    adv = grpo(inp.rewards, groups, scale=scale)
    keep = ~zero_variance(inp.rewards, groups) if inp.drop_zero_variance else _keep_all(adv)
    return EstimatorOutput(adv, keep)


@register_estimator("grpo")
def grpo_estimator(inp: EstimatorInput, options: NoOptions, state: dict[str, Any]) -> EstimatorOutput:
    """GRPO: ``(r - mean_g) / (std_g + eps)`` over the groups of ``group_by`` keys."""
    return _group_estimate(inp, group_index(inp.keys, inp.group_by), scale=True)


@register_estimator("dr_grpo")
def dr_grpo_estimator(inp: EstimatorInput, options: NoOptions, state: dict[str, Any]) -> EstimatorOutput:
    """Dr.GRPO: ``r - mean_g`` (no division by the group's std)."""
    return _group_estimate(inp, group_index(inp.keys, inp.group_by), scale=False)


@register_estimator("lsp_solver")
def lsp_solver_estimator(inp: EstimatorInput, options: NoOptions, state: dict[str, Any]) -> EstimatorOutput:
    """LSP solver: ``R(q, a) - V(q)``, ``V(q)`` the mean over the query's group (``group_by``,
    e.g. the episode: one query and its answers per episode)."""
    return _group_estimate(inp, group_index(inp.keys, inp.group_by), scale=False)


@register_estimator("lsp_challenger")
def lsp_challenger_estimator(inp: EstimatorInput, options: NoOptions, state: dict[str, Any]) -> EstimatorOutput:
    """LSP challenger: reward minus the mean over ALL the given turns (no std); with the game
    crediting ``-V(q)`` (+``V_Q(q)``) this is ``mean_i V(q_i) - V(q)``. ``group_by`` is unused."""
    adv = lsp_challenger(inp.rewards)
    one_group = torch.zeros_like(inp.games)
    keep = ~zero_variance(inp.rewards, one_group) if inp.drop_zero_variance else _keep_all(adv)
    return EstimatorOutput(adv, keep)


class RaeOptions(BaseModel):
    """SpyRL's Role-Advantage Estimation."""

    model_config = ConfigDict(extra="forbid")

    order: Literal["paper", "code", "spiral"] = Field(
        default="paper",
        description="paper: read the baseline before the update; code: update first, then z-score each game; "
        "spiral: read before update and drop zero advantages.",
    )
    alpha: float = Field(default=0.9, gt=0.0, lt=1.0, description="EMA decay of the role baselines (code 0.9, SPIRAL 0.95).")


@register_estimator("rae", options=RaeOptions)
def rae_estimator(inp: EstimatorInput, options: RaeOptions, state: dict[str, Any]) -> EstimatorOutput:
    """RAE: ``r - b_role`` with one EMA baseline per role, kept in ``state["values"]``
    (see :func:`arena.learners.advantages.role_advantages`). ``group_by`` is unused."""
    adv, keep, values = role_advantages(
        inp.rewards, inp.roles, inp.games, state.get("values", {}), alpha=options.alpha, order=options.order
    )
    state["values"] = values
    return EstimatorOutput(adv, keep)


class ObsBaselineOptions(BaseModel):
    """Baselines per observation (information state)."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(default=0.9, gt=0.0, lt=1.0, description="EMA decay of each observation's baseline.")
    max_observations: int = Field(
        default=100_000, ge=1, description="Most observations kept (the checkpoint's size); past it the least "
        "recently seen are forgotten.")


@register_estimator("obs_baseline", options=ObsBaselineOptions, requires=("observations_recur",))
def obs_baseline_estimator(inp: EstimatorInput, options: ObsBaselineOptions, state: dict[str, Any]) -> EstimatorOutput:
    """``r - b(o)`` with one EMA baseline per observation ``o`` (:func:`arena.core.types.observation_key`: the
    game's name for the information state, else the prompt), read before this step moves it; a turn at an
    observation not seen before gets ``r`` minus its ``group_by`` group's mean (the fallback). See
    :func:`arena.learners.advantages.observation_advantages`. ``state["baselines"]`` holds the baselines,
    ``state["values"]["observations"]`` how many (logged). With ``drop_zero_variance``, a fallback turn of a
    group without reward variance is dropped (its advantage is 0). Each sample's ``extras`` say which
    baseline it got (``observation_baseline``). Only for games that declare ``observations_recur``; with
    trajectory credit, ``trajectory_stats: turn`` (each turn at its own observation)."""
    groups = group_index(inp.keys, inp.group_by)
    adv, known, baselines = observation_advantages(
        inp.rewards, [observation_key(t) for t in inp.turns], groups, state.get("baselines", {}),
        alpha=options.alpha, limit=options.max_observations,
    )
    state["baselines"] = baselines
    state["values"] = {"observations": float(len(baselines))}
    keep = known | ~zero_variance(inp.rewards, groups) if inp.drop_zero_variance else _keep_all(adv)
    return EstimatorOutput(adv, keep, [{"observation_baseline": bool(k)} for k in known.tolist()])


def top_per_stream(
    tasks: Sequence[tuple[str, float]], m: int, alpha: float, fill: bool = False,
    streams: tuple[str, str] = ("skill", "exploration"),
) -> list[int]:
    """A step's curriculum: indices into ``tasks`` (each ``(stream, score)``), in order.

    Rank each stream by score (ties: earlier first) and take the top ``q = floor(alpha * m + 0.5)``
    tasks of ``streams[0]`` and the top ``m - q`` of ``streams[1]``; tasks of any other stream
    are never chosen. With ``fill``, a stream with too few tasks leaves its quota to the other.
    ``q`` rounds halves UP (alpha 0.5: m = 5 -> 3, m = 7 -> 4), the paper's ``alpha*M`` read as
    ordinary rounding; Python's ``round`` would round halves to even (m = 5 -> 2).
    """
    if m < 0 or not 0.0 <= alpha <= 1.0:
        raise ValueError("need m >= 0 and alpha in [0, 1]")
    first, second = streams
    q = min(m, int(alpha * m + 0.5))  # floor: alpha * m >= 0
    quota = {first: q, second: m - q}
    ranked = {
        s: sorted((i for i, (stream, _) in enumerate(tasks) if stream == s), key=lambda i: (-tasks[i][1], i))
        for s in quota
    }
    chosen = {s: ranked[s][: quota[s]] for s in quota}
    if fill:
        for s, other in ((first, second), (second, first)):
            spare = quota[other] - len(chosen[other])
            if spare > 0:
                chosen[s] = ranked[s][: quota[s] + spare]
    return sorted(chosen[first] + chosen[second])


class StreamCurriculumOptions(BaseModel):
    """Options of ``skill_sp_curriculum``; the defaults read Skill-SP's episodes."""

    model_config = ConfigDict(extra="forbid")

    tasks: int = Field(default=8, ge=1, description="M: valid tasks per step the solvers train on.")
    alpha: float = Field(default=0.5, ge=0.0, le=1.0, description="Share of M from the first stream (paper 0.5).")
    fill: bool = Field(default=False, description="Let one stream use the other's unused quota (paper: not said).")
    stream_key: str = Field(default="stream", description="Episode info key naming each task's stream.")
    streams: tuple[str, str] = Field(
        default=("skill", "exploration"), description="The two streams; the first gets floor(alpha * M + 0.5) tasks (halves round up)."
    )
    rank_by: str = Field(default="proposer", description="Seat whose episode reward ranks the tasks of a stream.")


@register_estimator("skill_sp_curriculum", options=StreamCurriculumOptions)
def stream_curriculum_estimator(
    inp: EstimatorInput, options: StreamCurriculumOptions, state: dict[str, Any]
) -> EstimatorOutput:
    """Skill-SP's solver curriculum: each given turn's episode is a task, its stream the episode's
    ``info[stream_key]`` and its score the ``rank_by`` seat's reward; the turns of the tasks
    :func:`top_per_stream` chooses get GRPO advantages over ``group_by``, every other turn is
    dropped (advantage 0, ``keep`` False)."""
    games = sorted(set(inp.games.tolist()))
    tasks = [
        (str(inp.episodes[g].info.get(options.stream_key)), float(inp.episodes[g].rewards.get(options.rank_by, 0.0)))
        for g in games
    ]
    chosen = {games[i] for i in top_per_stream(tasks, options.tasks, options.alpha, options.fill, options.streams)}
    selected = torch.tensor([g in chosen for g in inp.games.tolist()], dtype=torch.bool)
    groups = group_index(inp.keys, inp.group_by)
    adv = grpo(inp.rewards, groups, scale=True)
    keep = selected & ~zero_variance(inp.rewards, groups) if inp.drop_zero_variance else selected
    return EstimatorOutput(torch.where(selected, adv, torch.zeros_like(adv)), keep)


class NamedEstimator(Protocol):
    """What :class:`EstimatorStates` reads of a phase's config (``arena.learners.config.EstimatorConfig``,
    which imports this module's registry)."""

    name: str


class EstimatorStates:
    """One state dict per phase, owned by the trainer and saved with checkpoints (JSON)."""

    def __init__(self, estimators: Mapping[str, NamedEstimator]):
        self.names = {phase: est.name for phase, est in estimators.items()}
        self.states: dict[str, dict[str, Any]] = {}

    def for_phase(self, phase: str) -> dict[str, Any]:
        """The phase's state, created empty on first use; estimators mutate it in place."""
        return self.states.setdefault(phase, {})

    def state_dict(self) -> dict[str, dict[str, Any]]:
        return {phase: dict(state) for phase, state in self.states.items()}

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        self.states = {phase: dict(s) for phase, s in state.items()}

    def metrics(self) -> dict[str, float]:
        """Each stateful phase's ``values`` as ``name/key`` (``name/phase/key`` when
        several phases use the same estimator), e.g. ``rae/spy``."""
        uses: dict[str, int] = {}
        for name in self.names.values():
            uses[name] = uses.get(name, 0) + 1
        out: dict[str, float] = {}
        for phase, state in self.states.items():
            values = state.get("values")
            if not isinstance(values, Mapping):
                continue
            name = self.names.get(phase, phase)
            prefix = name if uses.get(name, 0) <= 1 else f"{name}/{phase}"
            out.update({f"{prefix}/{key}": float(v) for key, v in values.items()})
        return out
