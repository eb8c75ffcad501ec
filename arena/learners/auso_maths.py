"""AUSO's learner maths (PROTOCOLS §4), as small pure functions: the progress schedule, the top-k
JSD with a tail bin, and the action-level weights. The formulas are in :mod:`arena.learners.auso`'s
docstring, which registers the estimator and objective terms built from these; each function here
is tested against hand values (tests/learners/test_auso_values.py) and mutation-tested.

Shapes: ``N`` actions (one turn = one action), ``V`` vocabulary, ``k`` top-k, ``T`` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.learners.objectives import jsd
from arena.learners.progress import Progress

Stage = Literal["internalise", "utilise", "grpo"]


# ------------------------------------------------------------------ schedule
def smooth(x: float) -> float:
    """``x^2 (3 - 2x)`` with ``x`` clamped to [0, 1]: 0 -> 0, 1 -> 1, flat at both ends."""
    x = min(1.0, max(0.0, x))
    return x * x * (3.0 - 2.0 * x)


class AusoSchedule(BaseModel):
    """AUSO's progress schedule; each part can be switched off for the paper's ablations."""

    model_config = ConfigDict(extra="forbid")

    internalise: bool = Field(default=True, description="Run the internalisation stage (w_int); off: w_int = 0.")
    utilise: bool = Field(default=True, description="Run the utilisation stage (w_util); off: w_util = 0.")
    boundaries: tuple[float, float] = Field(
        default=(0.2, 0.7), description="Progress where internalisation has decayed and utilisation starts (2:5:3)."
    )
    ramp_steps: int = Field(default=5, ge=0, description="w_int ramps in as min(1, step / ramp_steps); 0: no ramp.")
    decay: Literal["smooth", "step"] = Field(
        default="smooth", description="w_int: smooth decay to 0 at the first boundary, or 1 until it (step)."
    )
    rise: Literal["smooth", "step"] = Field(
        default="smooth", description="w_util: smooth rise from the second boundary to 1 at the end, or 1 from it (step)."
    )
    floor: float = Field(default=0.01, ge=0.0, lt=1.0, description="Weights below this are 0.")

    @model_validator(mode="after")
    def _ordered(self) -> AusoSchedule:
        b1, b2 = self.boundaries
        if not 0.0 < b1 <= b2 < 1.0:
            raise ValueError(f"boundaries: need 0 < b1 <= b2 < 1, got ({b1}, {b2})")
        return self


@dataclass(frozen=True)
class StageWeights:
    """``w_int``, ``w_util`` and the stage they select at one step."""

    w_int: float
    w_util: float
    stage: Stage


def stage_weights(progress: Progress, cfg: AusoSchedule) -> StageWeights:
    """The schedule's weights at ``progress`` (see the module docstring)."""
    p = progress.fraction
    b1, b2 = cfg.boundaries
    w_int = 0.0
    if cfg.internalise:
        ramp = min(1.0, progress.step / cfg.ramp_steps) if cfg.ramp_steps else 1.0
        decay = 1.0 - smooth(p / b1) if cfg.decay == "smooth" else float(p < b1)
        w_int = ramp * decay
    w_util = 0.0
    if cfg.utilise and p > b2:
        w_util = smooth((p - b2) / (1.0 - b2)) if cfg.rise == "smooth" else 1.0
    w_int = w_int if w_int >= cfg.floor else 0.0
    w_util = w_util if w_util >= cfg.floor else 0.0
    stage: Stage = "internalise" if w_int > 0 else "utilise" if w_util > 0 else "grpo"
    return StageWeights(w_int, w_util, stage)


# ------------------------------------------------------------------ top-k JSD with a tail bin
def topk_tail(p: torch.Tensor, q: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Both log-distributions on ``q``'s top-``k`` tokens plus one tail bin. ``(..., V) -> (..., k+1)``."""
    k = min(k, q.shape[-1] - 1)
    index = q.topk(k, dim=-1).indices
    bins = []
    for logp in (p, q):
        top = logp.gather(-1, index)
        tail = logp.scatter(-1, index, float("-inf")).logsumexp(-1, keepdim=True)
        bins.append(torch.cat([top, tail], dim=-1))
    return bins[0], bins[1]


def topk_jsd(p: torch.Tensor, q: torch.Tensor, k: int = 64) -> torch.Tensor:
    """JSD of two log-distributions over ``q``'s top-``k`` tokens plus a tail bin. ``(..., V) -> (...)``.

    At most the full-vocabulary JSD (merging bins never increases it); equal to it when ``k >= V - 1``.
    """
    return jsd(*topk_tail(p, q, k))


def union_topk_jsd(p: torch.Tensor, q: torch.Tensor, k: int = 64) -> torch.Tensor:
    """Symmetric top-k JSD (public code's skill sensitivity): both log-distributions on the UNION of
    ``p``'s and ``q``'s top-``k`` tokens plus one tail bin (the rest). ``(..., V) -> (...)``.

    ``union_topk_jsd(p, q) == union_topk_jsd(q, p)``; :func:`topk_jsd` bins on ``q``'s top-k only and
    is not symmetric. At most the full-vocabulary JSD; equal to it when the union covers the vocabulary.
    Example, V = 4, k = 1: p = (.5, .3, .1, .1), q = (.1, .6, .2, .1): bins {0}, {1}, tail:
    JSD((.5, .3, .2), (.1, .6, .3)).
    """
    k = min(k, p.shape[-1])
    pi, qi = p.topk(k, dim=-1).indices, q.topk(k, dim=-1).indices
    extra = ~(qi[..., :, None] == pi[..., None, :]).any(-1)  # q's top tokens not among p's
    index = torch.cat([pi, qi], dim=-1)
    chosen = torch.zeros_like(p, dtype=torch.bool).scatter(-1, index, True)
    bins = []
    for logp in (p, q):
        tail = logp.masked_fill(chosen, float("-inf")).logsumexp(-1, keepdim=True)
        bins.append(torch.cat([logp.gather(-1, index), tail], dim=-1))
    tail_ok = bins[0][..., -1:].isfinite() & bins[1][..., -1:].isfinite()  # empty tail: no bin
    valid = torch.cat([torch.ones_like(pi, dtype=torch.bool), extra, tail_ok], dim=-1)
    a, b = (x.masked_fill(~valid, 0.0) for x in bins)
    m = torch.logaddexp(a, b) - math.log(2.0)
    terms = 0.5 * (a.exp() * (a - m) + b.exp() * (b - m))
    return (terms * valid).sum(-1)


def action_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token mean per action: ``(N, T), (N, T) -> (N,)`` (0 for an action without tokens)."""
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


# ------------------------------------------------------------------ action-level weights
def pass_gate(pass_rate: torch.Tensor) -> torch.Tensor:
    """``4 p (1 - p)``: 1 at p = 0.5, 0 for tasks all attempts solved or all failed."""
    return 4.0 * pass_rate * (1.0 - pass_rate)


def _zscore(x: torch.Tensor, groups: torch.Tensor, eps: float) -> tuple[torch.Tensor, int]:
    n = int(groups.max()) + 1 if groups.numel() else 0
    count = torch.zeros(n, dtype=x.dtype).index_add_(0, groups, torch.ones_like(x))
    mean = (torch.zeros(n, dtype=x.dtype).index_add_(0, groups, x) / count)[groups]
    var = (torch.zeros(n, dtype=x.dtype).index_add_(0, groups, (x - mean) ** 2) / count)[groups]
    std = var.sqrt()
    return torch.where(std > eps, (x - mean) / (std + eps), torch.zeros_like(x)), n


def centred_tanh(x: torch.Tensor, groups: torch.Tensor, clip: float | None = 3.0, eps: float = 1e-8) -> torch.Tensor:
    """Per group: ``m = tanh(clip(z))``, re-centred to mean 0, scaled to max |m| = 1 (all 0 when the
    group's values are equal). ``(N,), (N,) long -> (N,)``."""
    z, n = _zscore(x, groups, eps)
    if clip is not None:
        z = z.clamp(-clip, clip)
    m = torch.tanh(z)
    count = torch.zeros(n, dtype=x.dtype).index_add_(0, groups, torch.ones_like(x))
    m = m - (torch.zeros(n, dtype=x.dtype).index_add_(0, groups, m) / count)[groups]
    top = torch.zeros(n, dtype=x.dtype).scatter_reduce_(0, groups, m.abs(), reduce="amax")[groups]
    return torch.where(top > eps, m / top.clamp(min=eps), torch.zeros_like(m))


def utilisation_weights(
    sensitivity: torch.Tensor, groups: torch.Tensor, pass_rate: torch.Tensor, w_util: float,
    beta: float = 0.2, clip: float = 3.0,
) -> torch.Tensor:
    """``w_t = 1 + beta * w_util * 4p(1-p) * m_t`` with ``m`` the per-task :func:`centred_tanh` of the
    skill sensitivity ``I_t``. ``(N,) I, (N,) task ids, (N,) pass rates -> (N,)``; mean 1 within each task."""
    m = centred_tanh(sensitivity, groups, clip)
    return 1.0 + beta * w_util * pass_gate(pass_rate) * m


def summary(x: torch.Tensor, prefix: str, parts: tuple[str, ...] = ("mean", "min", "max")) -> dict[str, float]:
    """``{prefix_mean: ..., prefix_min: ..., ...}`` of ``x``'s non-NaN values (population ``std``);
    all NaN when there are none."""
    x = x[~x.isnan()].double()
    if x.numel() == 0:
        return {f"{prefix}_{part}": math.nan for part in parts}
    fns = {"mean": x.mean, "min": x.min, "max": x.max, "std": lambda: x.std(correction=0)}
    return {f"{prefix}_{part}": float(fns[part]()) for part in parts}


def internalisation_weights(action_jsd: torch.Tensor, beta: float = 0.2, ramp: float = 1.0) -> torch.Tensor:
    """Detached weights ``1 + beta * ramp * c`` over the actions (one group): mean exactly 1,
    between ``1 - beta`` and ``1 + beta``. ``(N,) -> (N,)``."""
    x = action_jsd.detach()
    c = centred_tanh(x, torch.zeros(x.shape[0], dtype=torch.long), clip=None)
    return 1.0 + beta * ramp * c


def distill_allowed(lengths: list[int], cap: int, max_capped: float = 0.05, max_mean: float = 0.4) -> bool:
    """Whether the distillation term runs: at most ``max_capped`` of the responses hit the length
    cap and their mean length is at most ``max_mean`` of it (public code: 5%, 0.4)."""
    if not lengths:
        return False
    capped = sum(n >= cap for n in lengths) / len(lengths)
    return capped <= max_capped and sum(lengths) / len(lengths) <= max_mean * cap
