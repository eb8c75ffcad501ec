"""Advantages whitened by the model's kernel between decisions (``learner.whiten``): an update that moves each
decision as a table would, not every private state alike.

**Why.** One policy-gradient step ``d = eta sum_i A_i grad f_i`` (``f_i = log pi(a_i | s_i)``, the
decision of sample ``i``) moves decision ``j`` by ``grad f_j . d = eta sum_i K_ji A_i``, with ``K_ji = grad
f_j . grad f_i`` the model's kernel between decisions. A table has ``K`` diagonal: each decision moves by
its own advantage. A language model's ``K`` is nearly all ones: on Kuhn poker the gradients at two states
that differ only in the card have cosine 0.991 (bench/kuhn_card_kernel.py), so a step that should raise
Bet with the King and lower it with the Jack moves both by about their mean, and the difference between
them, the part that uses the card, moves at about 1% of the rate.

**What.** The smallest step (in the weights' norm) that moves every decision of the batch as the table's step
would, ``grad f_j . d = eta kappa u_j`` for the tabular pushes ``u_j = sum_{i in j} A_i``, is
``d = eta sum_j v_j grad f_j`` with ``v = (K / kappa + lambda I)^-1 u`` (the Gauss-Newton step in the
decisions' space, damped by ``lambda`` = ``damping``; ``kappa`` the mean of ``K``'s diagonal, so that
orthogonal decisions get ``v = u / (1 + lambda)``). A decision here is one distinct (prompt, reply,
alternatives) of the batch: the samples that share it share its gradient, and its ``v_j`` is spread over
them in proportion to their advantages (equally when those sum to 0). The learner then takes its usual step
with these advantages: the loss, its clipping, aggregation and micro-batches are unchanged.

**How ``K`` is measured.** One backward pass per decision (``f_j`` alone, at the learner's temperature; in
``action_mode: score`` normalised over the reply's alternatives), each gradient folded into a count sketch of
``sketch`` numbers (a fixed random sign per weight, then the weights summed into ``sketch`` buckets in turn):
``E[S a . S b] = a . b``, with an error of about ``|a| |b| / sqrt(sketch)``: 7e-4 of the norms at the default
``2**21``, against the 9e-3 that separates Kuhn's cards. A decision's sketch is kept (by its key) for
``refresh`` steps before it is measured again: a forward and backward pass per decision not measured in the
last ``refresh`` steps. Meant for games with few distinct decisions (score mode, small games: Kuhn has 24);
a step with more than ``max_decisions`` is not whitened (``whiten/skipped``).

Logged: ``whiten/decisions``, ``whiten/kernel_cos`` (the mean cosine between the batch's decisions: how alike
a plain step would move them), ``whiten/gain`` (``|A'| / |A|``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import Sample


class WhitenConfig(BaseModel):
    """``learner.whiten``: advantages whitened by the model's kernel between the batch's decisions (arena/learners/whiten.py)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    damping: float = Field(default=0.1, gt=0.0, le=100.0, description="lambda: (K / kappa + lambda I)^-1; larger is "
                           "closer to the plain step (at most 1 / lambda times a decision's own push).")
    sketch: int = Field(default=2**21, ge=1024, le=2**26, description="Count-sketch size of each decision's gradient.")
    refresh: int = Field(default=1, ge=1, le=1000, description="Steps a decision's sketched gradient is kept before it "
                         "is measured again (the kernel moves slowly; a game with few decisions re-meets them every "
                         "step): 1 measures every step's decisions afresh.")
    layers: int = Field(default=0, ge=0, description="Measure the kernel on the gradients of the last N transformer "
                        "blocks (named '.layers.<i>.'), the final norm and the output head only: a backward pass that "
                        "stops there (about (1 + 2 N / L) / 3 of a whole one for L blocks); 0: every weight.")
    max_decisions: int = Field(default=64, ge=1, le=1024, description="A step with more distinct decisions is not "
                               "whitened (one backward pass each).")
    seed: int = Field(default=0, ge=0, description="Seeds the sketch's signs.")


def decision_key(s: Sample) -> tuple[Any, ...]:
    return tuple(s.prompt_ids), tuple(s.completion_ids), tuple(tuple(a) for a in s.alternatives)


def decision_logprob(model: Any, s: Sample, temperature: float) -> torch.Tensor:
    """``f = log pi(reply | prompt)``: the reply's summed token log-probabilities at ``temperature``, minus the
    log-sum-exp over the reply and its alternatives when it was chosen among them."""
    def reply(ids: Sequence[int]) -> torch.Tensor:
        x = torch.tensor([list(s.prompt_ids) + list(ids)], device=next(model.parameters()).device)
        logits = model(input_ids=x).logits[0, len(s.prompt_ids) - 1:-1].float() / temperature
        return torch.log_softmax(logits, -1).gather(-1, x[0, len(s.prompt_ids):, None]).sum()

    own = reply(s.completion_ids)
    if not s.alternatives:
        return own
    return own - torch.logsumexp(torch.stack([own] + [reply(a) for a in s.alternatives]), 0)


class Sketcher:
    """A count sketch of a model's gradient: each weight's fixed random sign, then the weights summed into
    ``size`` buckets in turn (weight ``n`` of the flattened model into bucket ``n mod size``). It also keeps
    the sketches of the decisions it measured, by key, with the step they were measured at."""

    def __init__(self, params: Sequence[torch.nn.Parameter], size: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.params, self.size = list(params), size
        self.signs = [(torch.randint(0, 2, (p.numel(),), generator=g, dtype=torch.int8) * 2 - 1) for p in self.params]
        self.kept: dict[tuple[Any, ...], tuple[int, torch.Tensor]] = {}
        self.steps = 0

    def __call__(self) -> torch.Tensor:
        out = torch.zeros(self.size, dtype=torch.float64)
        pos = 0
        for p, sign in zip(self.params, self.signs, strict=True):
            if p.grad is None:
                pos = (pos + p.numel()) % self.size
                continue
            v = p.grad.detach().flatten().cpu().double() * sign
            i = 0
            while i < v.numel():
                take = min(self.size - pos, v.numel() - i)
                out[pos:pos + take] += v[i:i + take]
                i += take
                pos = (pos + take) % self.size
        return out.float()


def measured_params(model: Any, layers: int) -> list[torch.nn.Parameter]:
    """The weights the kernel is measured on: every trained one, or the last ``layers`` blocks' (``.layers.<i>.``
    in the name), the final norm's and the output head's."""
    import re

    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not layers:
        return [p for _, p in named]
    index = {n: int(m.group(1)) for n, _ in named if (m := re.search(r"\.layers\.(\d+)\.", n))}
    if not index:
        return [p for _, p in named]
    first = max(index.values()) + 1 - layers
    return [p for n, p in named if index.get(n, -1) >= first or (n not in index and "embed" not in n)]


def whitened(model: Any, samples: Sequence[Sample], cfg: WhitenConfig, temperature: float,
             sketcher: Sketcher | None = None) -> tuple[list[Sample], dict[str, float], Sketcher | None]:
    """The samples with whitened advantages (module docstring), the step's figures, and the sketcher (kept by
    the learner: its signs are drawn once)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(decision_key(s), []).append(i)
    if len(groups) > cfg.max_decisions:
        return list(samples), {"whiten/decisions": float(len(groups)), "whiten/skipped": 1.0}, sketcher
    params = measured_params(model, cfg.layers)
    sketcher = sketcher or Sketcher(params, cfg.sketch, cfg.seed)
    sketcher.steps += 1
    trained = [p for p in model.parameters() if p.requires_grad]
    saved = [None if p.grad is None else p.grad.clone() for p in trained]
    off = [p for p in trained if not any(p is q for q in params)]
    for p in off:  # the backward pass stops below the measured blocks
        p.requires_grad_(False)
    measured = 0
    try:
        for key, members in groups.items():
            kept = sketcher.kept.get(key)
            if kept is None or sketcher.steps - kept[0] >= cfg.refresh:
                model.zero_grad(set_to_none=True)
                decision_logprob(model, samples[members[0]], temperature).backward()
                sketcher.kept[key] = (sketcher.steps, sketcher())
                measured += 1
    finally:
        for p in off:
            p.requires_grad_(True)
        for p, g in zip(trained, saved, strict=True):
            p.grad = g
    S = torch.stack([sketcher.kept[key][1] for key in groups]).double()  # (d, sketch)
    K = S @ S.T
    advantages, weights = solve(K, [[samples[i].advantage * samples[i].weight for i in m] for m in groups.values()],
                                cfg.damping)
    out = list(samples)
    for members, values in zip(groups.values(), advantages, strict=True):
        for i, a in zip(members, values, strict=True):
            out[i] = samples[i].model_copy(update={"advantage": a / samples[i].weight if samples[i].weight else 0.0})
    norm = torch.linalg.vector_norm(torch.tensor([s.advantage for s in samples], dtype=torch.float64))
    new = torch.linalg.vector_norm(torch.tensor([s.advantage for s in out], dtype=torch.float64))
    return out, {"whiten/decisions": float(len(groups)), "whiten/measured": float(measured), "whiten/kernel_cos": weights,
                 "whiten/gain": float(new / norm) if norm > 0 else 1.0}, sketcher


def solve(K: torch.Tensor, pushes: Sequence[Sequence[float]], damping: float) -> tuple[list[list[float]], float]:
    """The whitened pushes (module docstring), spread over each decision's samples, and the mean cosine between
    the decisions. ``K: (d, d)`` the kernel; ``pushes[j]``: decision ``j``'s samples' weighted advantages."""
    d = K.shape[0]
    diag = K.diagonal().clamp_min(1e-300)
    kappa = float(diag.mean())
    u = torch.tensor([sum(p) for p in pushes], dtype=torch.float64)
    v = torch.linalg.solve(K / kappa + damping * torch.eye(d, dtype=torch.float64), u)
    cos = K / torch.sqrt(diag[:, None] * diag[None, :])
    mean_cos = float((cos.sum() - cos.diagonal().sum()) / (d * (d - 1))) if d > 1 else 1.0
    out = []
    for j, p in enumerate(pushes):
        total = sum(p)
        if total != 0:
            out.append([float(v[j]) * a / total for a in p])
        else:
            out.append([float(v[j]) / len(p)] * len(p))
    return out, mean_cos
