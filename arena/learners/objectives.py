"""Extra objective terms added to the policy-gradient loss, registered by name (``learner.objectives``).

An objective is a class built from ``(options, coef)``. It declares the
``probes`` it needs (names of ``Sample.probes``: other prompts for the same
completion, e.g. AUSO's teacher context) and ``topk`` (how many of each probe's
most likely tokens it reads; 0: the full vocabulary). For each micro-batch the
learner calls ``loss(ctx)``; the returned scalar must be normalised with
``ctx.totals`` so that the sum over micro-batches is the full-batch term (the
gradient does not depend on the token budget). Probe distributions are computed
once per step, from the weights before the update, by no-grad forward passes on
``probe_prompt_ids + completion_ids``.

Shapes: ``b`` rows, ``T`` completion positions, ``V`` vocabulary, ``k`` top-k.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from arena.learners.progress import Progress

if TYPE_CHECKING:
    from arena.core.types import Sample
    from arena.learners.batch import MicroBatch


@dataclass(frozen=True)
class ProbeDist:
    """A probe's no-grad distribution over the completion tokens of a micro-batch.

    ``index: (b, T, k)`` its top-k token ids (most likely first) or None for the full
    vocabulary; ``logp: (b, T, k)`` (or ``(b, T, V)``) their log-probs; ``tail: (b, T)``
    the log of the remaining mass; ``present: (b,) bool`` rows that have the probe
    (the others were scored on their own prompt and must be ignored).
    """

    index: torch.Tensor | None
    logp: torch.Tensor
    tail: torch.Tensor | None
    present: torch.Tensor


@dataclass(frozen=True)
class BatchTotals:
    """Counts over the WHOLE batch, for normalising a micro-batch's share of a term."""

    samples: int
    tokens: float
    probe_samples: Mapping[str, int]


@dataclass(frozen=True)
class ObjectiveContext:
    """What an objective term sees for one micro-batch.

    ``logp: (b, T, V)`` the policy's log-softmax at the sampling temperature (with
    grad); ``weights: (b,)`` the samples' loss weights; ``probes`` by name;
    ``samples`` the whole batch, for terms that select rows by their ``extras``.
    """

    batch: MicroBatch
    logp: torch.Tensor
    probes: Mapping[str, ProbeDist]
    weights: torch.Tensor
    progress: Progress | None
    totals: BatchTotals
    #: the WHOLE batch (``batch.index`` are this micro-batch's positions in it): extras, lengths.
    samples: Sequence[Sample] = ()
    #: per-row values a term's ``loss`` leaves for the step's log: name (one of its ``records``)
    #: -> ``(b,)`` detached, NaN for rows without a value; the learner gathers them per term.
    record: dict[str, torch.Tensor] = field(default_factory=dict)

    def topk_tail(self, probe: str, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Policy (with grad) and probe (no grad) log-probs over the probe's top-``k`` tokens
        plus one tail bin, and the rows that have the probe. ``-> (b,T,k+1), (b,T,k+1), (b,)``.
        ``k`` at most the ``topk`` the objective declared."""
        d = self.probes[probe]
        if d.index is None:
            return self.logp, d.logp, d.present
        index = d.index[..., :k]
        q_tail = torch.cat([d.logp[..., k:], d.tail[..., None]], dim=-1).logsumexp(-1)  # type: ignore[index]
        q = torch.cat([d.logp[..., :k], q_tail[..., None]], dim=-1)
        p_top = self.logp.gather(-1, index)
        p_tail = self.logp.scatter(-1, index, float("-inf")).logsumexp(-1)
        return torch.cat([p_top, p_tail[..., None]], dim=-1), q, d.present


class Objective(ABC):
    """Base of the terms: ``probes`` and ``topk`` it needs, ``loss(ctx)`` its scaled share.

    A term with ``reweights = True`` also scales advantages action by action before the
    update (AUSO's utilisation): the learner calls ``action_values`` on each micro-batch
    with the policy's own no-grad log-softmax (one extra forward pass per micro-batch),
    then ``action_weights`` once with every sample's value, and multiplies each sample's
    token weights by its weight.
    """

    probes: tuple[str, ...] = ()
    topk: int = 0
    reweights: bool = False
    #: False when ``loss`` reads no probes (only ``action_values`` does): the learner then scores the
    #: probes inside the reweighting pass, one micro-batch at a time, instead of holding them for the
    #: whole step (what a full-vocabulary probe, ``topk = 0``, needs at real vocabulary sizes).
    loss_probes: bool = True
    #: The term's weight when the config gives no ``coef`` (AUSO's distillation: the paper's 0.1).
    default_coef: float = 1.0
    #: names of the per-row values ``loss`` may put in ``ctx.record`` (see :meth:`step_stats`).
    records: tuple[str, ...] = ()

    def active_at(self, progress: Progress | None) -> bool:
        """Whether the term does anything at this step; if not, its probes are not scored."""
        return True

    def reweights_at(self, progress: Progress | None) -> bool:
        """Whether the term reweights at this step (the learner skips its forward passes if not)."""
        return self.reweights and self.active_at(progress)

    def action_values(self, batch: MicroBatch, logp: torch.Tensor, probes: Mapping[str, ProbeDist]) -> torch.Tensor:
        """One value per row of the micro-batch (no grad). ``(b, T, V) -> (b,)``."""
        raise NotImplementedError

    def action_weights(self, samples: Sequence[Sample], values: torch.Tensor, progress: Progress | None) -> torch.Tensor:
        """Advantage multipliers for the whole batch from its values. ``(N,) -> (N,)``."""
        raise NotImplementedError

    def step_stats(
        self, samples: Sequence[Sample], records: Mapping[str, torch.Tensor], progress: Progress | None
    ) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """The step's statistics, and per-sample values to keep, from the whole batch's records.

        Called once per step on every rank, after the update, whether or not the term was
        active. ``records``: name -> ``(N,)`` float64 over the WHOLE batch (every rank's
        micro-batches; the mean over ``updates_per_batch`` epochs; NaN where none): each of
        ``records`` the loss filled, plus ``value`` and ``weight`` (the action values and the
        weights applied) when the term reweighted this step. Returns ``(stats, per_sample)``:
        stats go to the step's metrics as named; each ``per_sample`` ``(N,)`` vector is written,
        where not NaN, into the samples' ``extras`` under its name (the episode log saves it).
        """
        return {}, {}

    def __init__(self, options: Any, coef: float):
        self.options = options
        self.coef = coef

    @abstractmethod
    def loss(self, ctx: ObjectiveContext) -> torch.Tensor:
        """This micro-batch's share of the term (already scaled by ``coef``)."""


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ObjectiveSpec:
    name: str
    cls: type[Objective]
    options: type[BaseModel]


OBJECTIVES: dict[str, ObjectiveSpec] = {}


def register_objective(name: str, options: type[BaseModel] = NoOptions) -> Callable[[type[Objective]], type[Objective]]:
    def decorate(cls: type[Objective]) -> type[Objective]:
        if name in OBJECTIVES:
            raise ValueError(f"objective {name!r} is already registered")
        OBJECTIVES[name] = ObjectiveSpec(name, cls, options)
        return cls

    return decorate


def get_objective(name: str) -> ObjectiveSpec:
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; known: {', '.join(sorted(OBJECTIVES))}")
    return OBJECTIVES[name]


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence between log-distributions over the last dim. ``(..., K) -> (...)``."""
    m = torch.logaddexp(p, q) - math.log(2.0)
    return 0.5 * (p.exp() * (p - m)).sum(-1) + 0.5 * (q.exp() * (q - m)).sum(-1)


class JsdDistillOptions(BaseModel):
    """AUSO's internalisation term."""

    model_config = ConfigDict(extra="forbid")

    probe: str = Field(default="teacher", description="Sample.probes entry whose distribution is the (detached) teacher.")
    topk: int = Field(
        default=64, ge=1, description="Teacher's most likely tokens compared one by one; the rest form one tail bin."
    )


@register_objective("jsd_distill", options=JsdDistillOptions)
class JsdDistill(Objective):
    """``coef * mean_samples mean_tokens JSD(pi_topk+tail || teacher_topk+tail)``.

    Per completion token: the policy's distribution on the teacher's top-k tokens
    plus one tail bin, against the detached teacher (the same model given the
    probe prompt) on the same bins. Token mean per sample, then the mean over the
    batch's samples that have the probe; samples without it contribute 0. The
    samples' loss weights do not apply (``coef`` is this term's weight).
    """

    def __init__(self, options: JsdDistillOptions, coef: float):
        super().__init__(options, coef)
        self.probes = (options.probe,)
        self.topk = options.topk

    def loss(self, ctx: ObjectiveContext) -> torch.Tensor:
        probe = self.options.probe
        n = ctx.totals.probe_samples.get(probe, 0)
        if n == 0 or probe not in ctx.probes:
            return ctx.logp.new_zeros(())
        k = min(self.topk, ctx.logp.shape[-1] - 1)
        p, q, present = ctx.topk_tail(probe, k)
        mask = ctx.batch.completion_mask * present[:, None].to(ctx.batch.completion_mask.dtype)  # (b, T)
        per_sample = (jsd(p, q) * mask).sum(-1) / ctx.batch.completion_mask.sum(-1).clamp(min=1.0)  # (b,)
        return self.coef * per_sample.sum() / n
