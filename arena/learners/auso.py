"""AUSO's learner (PROTOCOLS §4): the progress schedule, the top-k JSD with a tail bin, and the
action-level weights, as formulas here and as small pure functions in
:mod:`arena.learners.auso_maths` (re-exported here); this module registers the estimator and the
objective terms built from them.

Shapes: ``N`` actions (one turn = one action), ``V`` vocabulary, ``k`` top-k, ``T`` tokens.

Schedule, over progress ``p = (step - 1) / (T - 1)`` with ``smooth(x) = x^2 (3 - 2x)`` on [0, 1]::

    w_int  = min(1, step / ramp) * (1 - smooth(p / b1))
    w_util = smooth((p - b2) / (1 - b2))            for p > b2, else 0
    weights below 0.01 are 0; stage = internalise if w_int > 0, else utilise if w_util > 0, else grpo

with the published boundaries ``b1, b2 = 0.2, 0.7`` (the 2:5:3 split) and ``ramp = 5``.

Utilisation weight of action t of a task with pass rate p::

    g = 4 p (1 - p);  z = clip((I_t - mean_task I) / std_task I, -3, 3);  m = tanh(z)
    m <- m - mean_task m;  m <- m / max_task |m|;  w_t = 1 + 0.2 * w_util * g * m;  A_t = A_GRPO * w_t

Registered: the estimator ``auso`` (GRPO plus each turn's task pass rate, keeping all-fail
tasks for internalisation), the objective term ``auso_distill`` (internalisation) and
``auso_utilise`` (no loss of its own: it scales each action's advantage by ``w_t``).

Internalisation (public code, ``compute_jsd_loss`` with ``action_ig_enabled``): each
action's distillation loss is its token-mean JSD; weight ``1 + beta * c`` with ``c`` the
tanh of the z-score of the actions' JSD, re-centred to mean 0 and scaled to max |c| = 1
(weights mean exactly 1, at most 1 + beta); loss = mean over actions of weight x JSD.

Logged every step (the learner's stats, so metrics.jsonl; names are stable). Means are over
the WHOLE batch's actions, every rank's, taken once from per-action values; NaN (null in
metrics.jsonl) when there is no action to take them over.

* ``auso/w_int`` (``auso_distill``'s schedule), ``auso/w_util`` (``auso_utilise``'s): every
  step, 0 included, so the 2:5:3 shape shows in the curves.
* Internalisation, at steps with ``w_int > 0``: ``auso/int_actions`` (selected actions: with
  the teacher probe and, with ``only_failed``, of all-fail tasks), ``auso/int_skipped`` (1 when
  the term was skipped for the length cap, else 0), ``auso/int_capped_share`` (the batch's
  responses that hit the cap), ``auso/int_jsd_mean`` / ``auso/int_jsd_max`` (per-action JSD to
  the teacher probe, token mean over the action), ``auso/int_weight_min|max|mean`` (the action
  weights ``1 + beta c``).
Skill sensitivity ``I_t`` (utilisation) is the SYMMETRIC top-k JSD of the public code: both
contexts binned on the union of their top-k tokens plus a tail (:func:`union_topk_jsd`,
``auso_utilise`` option ``bins: union``); the distillation JSD bins on the teacher's top-k.

* Utilisation, at steps with ``w_util > 0``, over the actions with the no-skill probe:
  ``auso/util_sensitivity_mean|std|min|max`` (``I_t``; std is the population one),
  ``auso/util_gate_mean`` and ``auso/util_gate_zero_share`` (``4p(1-p)`` over the TASKS, and
  the share of tasks whose gate is 0), ``auso/util_m_min|max`` (the re-centred tanh ``m``),
  ``auso/util_weight_min|max|mean`` (``w_t``).
* Per action (``Sample.extras``, saved per turn in ``<run_dir>/episodes/`` for ``arena.view``):
  ``auso_jsd`` (internalising: the JSD to the teacher probe; utilising: ``I_t``) and
  ``auso_weight`` (internalising: the distillation weight; utilising: ``w_t``). The stages never
  overlap (``w_int`` is 0 from ``b1`` on, ``w_util`` until ``b2 >= b1``), so one term writes them.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from arena.learners.advantages import group_index, grpo, zero_variance
from arena.learners.auso_maths import (  # noqa: F401 - the maths, re-exported under their old home
    smooth, AusoSchedule, StageWeights, stage_weights, topk_tail, topk_jsd,
    union_topk_jsd, action_mean, pass_gate, _zscore, centred_tanh, utilisation_weights,
    summary, internalisation_weights, distill_allowed, Stage,
)
from arena.learners.estimators import EstimatorInput, EstimatorOutput, register_estimator
from arena.learners.objectives import Objective, ObjectiveContext, ProbeDist, jsd, register_objective
from arena.learners.progress import Progress



# ------------------------------------------------------------------ registered: estimator and objective term
class AusoEstimatorOptions(BaseModel):
    """AUSO's advantage estimator."""

    model_config = ConfigDict(extra="forbid")

    pass_metric: str = Field(
        default="success_rate", description="Episode metric holding the task's pass rate p over its G attempts."
    )
    keep_failed: bool = Field(
        default=True, description="Keep all-fail tasks even without reward variance (the distillation term needs them)."
    )


@register_estimator("auso", options=AusoEstimatorOptions)
def auso_estimator(inp: EstimatorInput, options: AusoEstimatorOptions, state: dict[str, Any]) -> EstimatorOutput:
    """GRPO over the ``group_by`` groups (a task's G attempts: ``[episode]``; under trajectory credit
    each attempt counts once, ``trajectory_stats: attempt``, see :mod:`arena.learners.samples`), each turn's pass rate
    ``p`` (the episode's ``pass_metric``) in ``extras["pass_rate"]``. Zero-variance groups are dropped
    as in GRPO, except all-fail tasks (p = 0) with ``keep_failed``: their advantage is 0, and
    ``auso_distill`` internalises them."""
    groups = group_index(inp.keys, inp.group_by)
    adv = grpo(inp.rewards, groups)
    rates = [inp.episodes[g].metrics.get(options.pass_metric, math.nan) for g in inp.games.tolist()]
    if any(math.isnan(r) for r in rates):
        raise ValueError(f"estimator auso: the episodes have no metric {options.pass_metric!r} (pass_metric)")
    keep = torch.ones_like(adv, dtype=torch.bool)
    if inp.drop_zero_variance:
        failed = torch.tensor(rates) == 0.0
        keep = ~zero_variance(inp.rewards, groups) | (failed & options.keep_failed)
    return EstimatorOutput(adv, keep, [{"pass_rate": float(r)} for r in rates])


class AusoDistillOptions(BaseModel):
    """AUSO's internalisation term."""

    model_config = ConfigDict(extra="forbid")

    probe: str = Field(default="teacher", description="Sample.probes entry of the teacher context (all skills).")
    topk: int = Field(default=64, ge=1, description="Teacher's likeliest tokens compared one by one; the rest: one tail bin.")
    schedule: AusoSchedule = Field(default_factory=AusoSchedule, description="Gives w_int; the term is 0 when w_int is.")
    only_failed: bool = Field(
        default=True, description="Only actions of tasks with pass rate 0 (extras['pass_rate'], estimator auso)."
    )
    action_weights: bool = Field(default=True, description="Weight each action's JSD by 1 + beta * c (mean 1).")
    beta: float = Field(default=0.2, ge=0.0, lt=1.0, description="Strength of the action-level weight (cap 1 + beta).")
    weight_ramp_steps: int = Field(default=5, ge=0, description="The action weight ramps in over these steps; 0: none.")
    max_capped: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Skip the term when more of the batch's responses hit the length cap."
    )
    length_cap: Annotated[int, Field(ge=1)] | Literal["auto"] | None = Field(
        default="auto",
        description="max_new_tokens: also skip when the mean length exceeds 0.4 of it (public code). auto: the "
        "trainable policy's largest max_new_tokens, filled in by the trainer at start-up (resolve_length_cap); "
        "None: that rule off (an unresolved auto, e.g. a Learner built by hand, is off too).",
    )


def resolve_length_cap(cfg: Any, max_new_tokens: int) -> Any:
    """``cfg`` (a LearnerConfig) with every ``auso_distill`` whose ``length_cap`` is ``auto`` given
    ``max_new_tokens`` (the trainable policy's largest), so the public code's mean-length rule is on."""
    objectives = [
        o.model_copy(update={"options": o.options | {"length_cap": max_new_tokens}})
        if o.name == "auso_distill" and o.options.get("length_cap") == "auto" else o
        for o in cfg.objectives
    ]
    return cfg.model_copy(update={"objectives": objectives})


@register_objective("auso_distill", options=AusoDistillOptions)
class AusoDistill(Objective):
    """``coef * w_int * (1/n) sum_a weight_a * JSD_a`` over the selected actions ``a``.

    ``JSD_a``: the token mean over action a's completion of the top-k (+ tail) JSD between
    the policy (with grad) and the detached teacher probe (same model, teacher prompt, the
    student's own tokens). Selected: the batch's samples with the probe and, with
    ``only_failed``, pass rate 0; ``n`` counts them over the whole batch, so micro-batches
    add up to the batch's term. ``weight_a`` (:func:`internalisation_weights`, ramp
    ``min(1, step / weight_ramp_steps)``) is z-scored over the WHOLE batch's selected
    actions, so any split into micro-batches (or ranks) gives the full batch's gradient:
    with ``action_weights`` the term reweights (:class:`~arena.learners.objectives.Objective`),
    i.e. the learner scores each micro-batch once more with no grad before the update,
    :meth:`action_values` gives each action's JSD and :meth:`action_weights` computes the
    weights over all of them (advantages are left alone: it returns ones). The weights
    are detached and fixed for the step (every epoch of ``updates_per_batch`` uses the
    weights from before the update). Until issue #24 they were z-scored per micro-batch,
    so several micro-batches changed the gradient. ``w_int`` comes from the schedule at
    the step's progress (1 without progress). Skipped (0) when the batch's responses run
    into the length cap (:func:`distill_allowed`): over ``max_capped`` (5%) hit it, or their
    mean length exceeds 0.4 of ``length_cap``, by default (``auto``) the trainable policy's
    max_new_tokens. ``coef`` unset: 0.1, the paper's (issue #24: it was 1.0, and the
    mean-length rule off unless ``length_cap`` was given).
    """

    records = ("jsd", "weight")
    default_coef = 0.1  # the paper's 0.1 * w_int

    def __init__(self, options: AusoDistillOptions, coef: float):
        super().__init__(options, coef)
        self.probes = (options.probe,)
        self.topk = options.topk
        self.reweights = options.action_weights
        # The step's whole-batch action weights ((N,), 1 where not selected) and the batch they are for.
        self._weights: tuple[Any, torch.Tensor] | None = None

    def action_values(self, batch: Any, logp: torch.Tensor, probes: Any) -> torch.Tensor:
        """Each row's token-mean JSD to the teacher probe (no grad); NaN without the probe. ``-> (b,)``."""
        d = probes.get(self.options.probe)
        if d is None:
            return torch.full((logp.shape[0],), math.nan)
        p, q = probe_bins(logp, d, min(self.topk, logp.shape[-1] - 1))
        values = action_mean(jsd(p, q), batch.completion_mask)
        return torch.where(d.present, values, torch.full_like(values, math.nan))

    def action_weights(self, samples: Any, values: torch.Tensor, progress: Progress | None) -> torch.Tensor:
        """Keeps the distillation weights over the whole batch's selected actions for :meth:`loss`;
        returns ones (the advantages are not scaled)."""
        rows = torch.tensor([self._selected(s) for s in samples], dtype=torch.bool) & ~values.isnan()
        weights = torch.ones_like(values)
        if int(rows.sum()) > 1:
            step = progress.step if progress is not None else 1
            ramp = min(1.0, step / self.options.weight_ramp_steps) if self.options.weight_ramp_steps else 1.0
            weights[rows] = internalisation_weights(values[rows], self.options.beta, ramp)
        self._weights = (samples, weights)
        return torch.ones_like(values)

    def _w_int(self, progress: Progress | None) -> float:
        return 1.0 if progress is None else stage_weights(progress, self.options.schedule).w_int

    def active_at(self, progress: Progress | None) -> bool:
        return self._w_int(progress) > 0.0

    def step_stats(
        self, samples: Any, records: Any, progress: Progress | None
    ) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """``auso/w_int`` always; the internalisation statistics at steps with ``w_int > 0``;
        per action ``auso_jsd`` and ``auso_weight`` (module docstring)."""
        w_int = self._w_int(progress)
        stats = {"auso/w_int": w_int}
        if w_int == 0.0:
            return stats, {}
        capped = sum(s.extras.get("finish_reason") == "length" for s in samples) / len(samples) if samples else 0.0
        stats |= {
            "auso/int_actions": float(sum(self._selected(s) for s in samples)),
            "auso/int_skipped": float(not self._allowed(samples)),
            "auso/int_capped_share": capped,
        }
        nan = torch.full((len(samples),), math.nan, dtype=torch.float64)
        jsds, weights = records.get("jsd", nan), records.get("weight", nan)
        stats |= summary(jsds, "auso/int_jsd", ("mean", "max")) | summary(weights, "auso/int_weight")
        return stats, {"auso_jsd": jsds, "auso_weight": weights}

    def _selected(self, sample: Any) -> bool:
        if self.options.probe not in sample.probes:
            return False
        return not self.options.only_failed or sample.extras.get("pass_rate") == 0.0

    def _allowed(self, samples: Any) -> bool:
        if not samples:
            return True
        capped = sum(s.extras.get("finish_reason") == "length" for s in samples) / len(samples)
        if capped > self.options.max_capped:
            return False
        cap = self.options.length_cap
        return not isinstance(cap, int) or distill_allowed([len(s.completion_ids) for s in samples], cap, 1.0)

    def loss(self, ctx: ObjectiveContext) -> torch.Tensor:
        opts: AusoDistillOptions = self.options
        zero = ctx.logp.new_zeros(())
        w_int = self._w_int(ctx.progress)
        samples = ctx.samples
        if w_int == 0.0 or opts.probe not in ctx.probes or not samples or not self._allowed(samples):
            return zero
        n = sum(self._selected(s) for s in samples)
        rows = torch.tensor([self._selected(samples[i]) for i in ctx.batch.index], device=ctx.logp.device)
        if n == 0 or not bool(rows.any()):
            return zero
        k = min(self.topk, ctx.logp.shape[-1] - 1)
        p, q, present = ctx.topk_tail(opts.probe, k)
        rows = rows & present
        per_action = action_mean(jsd(p, q), ctx.batch.completion_mask)[rows]  # (selected,)
        weights = torch.ones_like(per_action)
        if opts.action_weights and self._weights is not None and self._weights[0] is samples:
            weights = self._weights[1][ctx.batch.index][rows.cpu()].to(per_action)
        elif opts.action_weights and per_action.numel() > 1:  # not through the learner's reweighting pass
            step = ctx.progress.step if ctx.progress is not None else 1
            ramp = min(1.0, step / opts.weight_ramp_steps) if opts.weight_ramp_steps else 1.0
            weights = internalisation_weights(per_action, opts.beta, ramp)
        for name, values in (("jsd", per_action), ("weight", weights)):
            row = torch.full(rows.shape, math.nan, dtype=torch.float64)
            row[rows.cpu()] = values.detach().double().cpu()
            ctx.record[name] = row
        return self.coef * w_int * (weights * per_action).sum() / n


class AusoUtiliseOptions(BaseModel):
    """AUSO's utilisation stage: action-level advantage weights."""

    model_config = ConfigDict(extra="forbid")

    probe: str = Field(default="no_skill", description="Sample.probes entry of the context without skills.")
    topk: int = Field(default=64, ge=1, description="No-skill context's likeliest tokens compared one by one, plus a tail bin.")
    schedule: AusoSchedule = Field(default_factory=AusoSchedule, description="Gives w_util; weights are 1 when it is 0.")
    beta: float = Field(default=0.2, ge=0.0, lt=1.0, description="w_t = 1 + beta * w_util * g * m.")
    clip: float = Field(default=3.0, gt=0.0, description="The per-task z-score of I_t is clipped to +-clip.")
    bins: Literal["union", "probe"] = Field(
        default="union",
        description="union: I_t on the union of both contexts' top-k tokens plus a tail (symmetric, public code; "
        "needs the no-skill probe's full distribution, scored one micro-batch at a time); probe: on the no-skill "
        "probe's top-k only (not symmetric; the behaviour before issue #24).",
    )


def probe_bins(logp: torch.Tensor, probe: ProbeDist, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's ``logp (b,T,V)`` and the probe on the probe's top-``k`` tokens plus a tail bin."""
    if probe.index is None:
        return topk_tail(logp, probe.logp, k)
    index = probe.index[..., :k]
    q_tail = torch.cat([probe.logp[..., k:], probe.tail[..., None]], dim=-1).logsumexp(-1)  # type: ignore[index]
    q = torch.cat([probe.logp[..., :k], q_tail[..., None]], dim=-1)
    p_tail = logp.scatter(-1, index, float("-inf")).logsumexp(-1)
    return torch.cat([logp.gather(-1, index), p_tail[..., None]], dim=-1), q


@register_objective("auso_utilise", options=AusoUtiliseOptions)
class AusoUtilise(Objective):
    """``A_t = A_GRPO * w_t`` with ``w_t`` from :func:`utilisation_weights`; adds no loss.

    ``I_t``: the top-k (+ tail) JSD between the policy in the student's context (its own
    prompt, skills included) and in the no-skill probe's, token mean over the action;
    both no-grad, before the update. ``bins: union`` (default, :func:`union_topk_jsd`):
    on the union of both contexts' top-k, symmetric as in the public code; ``probe``: on
    the probe's top-k only (:func:`probe_bins`), which changed the value when the two
    contexts were swapped in 921 of 2,000 random cases (issue #24). Tasks are the samples' ``extras["group"]`` (the
    estimator's ``group_by``: the episode), ``p`` their ``extras["pass_rate"]``
    (estimator ``auso``; missing: gate 0). Samples without the probe keep weight 1 and
    stay out of their task's statistics. ``w_util`` from the schedule (1 without progress).
    """

    reweights = True
    loss_probes = False  # the no-skill probe is scored in the reweighting pass, one micro-batch at a time

    def __init__(self, options: AusoUtiliseOptions, coef: float):
        super().__init__(options, coef)
        self.probes = (options.probe,)
        self.topk = 0 if options.bins == "union" else options.topk  # union: the probe's whole distribution

    def loss(self, ctx: ObjectiveContext) -> torch.Tensor:
        return ctx.logp.new_zeros(())

    def _w_util(self, progress: Progress | None) -> float:
        return 1.0 if progress is None else stage_weights(progress, self.options.schedule).w_util

    def active_at(self, progress: Progress | None) -> bool:
        return self._w_util(progress) > 0.0

    def action_values(self, batch: Any, logp: torch.Tensor, probes: Any) -> torch.Tensor:
        d = probes.get(self.options.probe)
        if d is None:
            return torch.full((logp.shape[0],), math.nan)
        if self.options.bins == "union" and d.index is None:
            per_token = union_topk_jsd(logp, d.logp, self.options.topk)
        else:
            per_token = jsd(*probe_bins(logp, d, min(self.options.topk, logp.shape[-1] - 1)))
        values = action_mean(per_token, batch.completion_mask)
        return torch.where(d.present, values, torch.full_like(values, math.nan))

    @staticmethod
    def _tasks(samples: Any, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each sample's task id and pass rate, and which samples have a value; a sample without
        one is a task of its own with pass rate 0 (gate 0, weight 1)."""
        present = ~values.isnan()
        keys = [s.extras.get("group", "") if present[i] else f"\x00{i}" for i, s in enumerate(samples)]
        groups = group_index([{"task": str(k)} for k in keys], ["task"])
        rates = torch.tensor([float(s.extras.get("pass_rate", 0.0)) if present[i] else 0.0 for i, s in enumerate(samples)],
                             dtype=values.dtype)
        return groups, rates, present

    def action_weights(self, samples: Any, values: torch.Tensor, progress: Progress | None) -> torch.Tensor:
        w_util = self._w_util(progress)
        if w_util == 0.0:
            return torch.ones_like(values)
        groups, rates, _ = self._tasks(samples, values)
        return utilisation_weights(values.nan_to_num(0.0), groups, rates, w_util, self.options.beta, self.options.clip)

    def step_stats(
        self, samples: Any, records: Any, progress: Progress | None
    ) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """``auso/w_util`` always; the utilisation statistics at steps that reweighted; per
        action ``auso_jsd`` (``I_t``) and ``auso_weight`` (``w_t``) (module docstring)."""
        stats = {"auso/w_util": self._w_util(progress)}
        values = records.get("value")
        if values is None:
            return stats, {}
        groups, rates, present = self._tasks(samples, values)
        nan = torch.full_like(values, math.nan)
        m = torch.where(present, centred_tanh(values.nan_to_num(0.0), groups, self.options.clip), nan)
        weights = torch.where(present, records["weight"].to(values), nan)
        tasks = groups[present].unique()
        gate = pass_gate(torch.zeros(int(groups.max()) + 1, dtype=values.dtype).index_copy_(0, groups, rates))[tasks]
        stats |= summary(values, "auso/util_sensitivity", ("mean", "std", "min", "max"))
        stats |= {
            "auso/util_gate_mean": float(gate.mean()) if gate.numel() else math.nan,
            "auso/util_gate_zero_share": float((gate == 0.0).double().mean()) if gate.numel() else math.nan,
        }
        stats |= summary(m, "auso/util_m", ("min", "max")) | summary(weights, "auso/util_weight")
        return stats, {"auso_jsd": values, "auso_weight": weights}
