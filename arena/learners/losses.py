"""Policy-gradient losses, KL estimators and aggregation: small pure functions.

Shapes: ``B`` sequences, ``T`` completion positions (padded). ``logp``,
``old_logp``, ``ref_logp``: ``(B, T)`` log-probabilities of the sampled tokens;
``adv``: ``(B,)`` or ``(B, T)``; ``mask``: ``(B, T)`` 1.0 on real completion
tokens. Per-token losses are ``(B, T)``; :func:`aggregate` reduces them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch

Aggregation = Literal["token", "sequence", "constant"]
KLEstimator = Literal["k1", "k3"]


def _per_token(adv: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return adv[:, None].expand_as(like) if adv.dim() == 1 else adv


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_low: float = 0.2, clip_high: float = 0.2
) -> torch.Tensor:
    """PPO/GRPO clipped surrogate, as a loss: ``-min(r*A, clip(r, 1-cl, 1+ch)*A)``. ``-> (B, T)``."""
    adv = _per_token(adv, logp)
    ratio = torch.exp(logp - old_logp)
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    return -torch.minimum(ratio * adv, clipped * adv)


def reinforce_detached(logp: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """LSP's on-policy REINFORCE: ``-ratio * A`` with the ratio's denominator detached.

    The value is ``-A`` (ratio 1), the gradient ``-A * grad(logp)``. ``-> (B, T)``.
    """
    adv = _per_token(adv, logp)
    return -torch.exp(logp - logp.detach()) * adv


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: KLEstimator = "k3") -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimate from sampled tokens. ``-> (B, T)``.

    k1: ``log pi - log pi_ref`` (unbiased, can be negative); k3: ``exp(d) - d - 1`` with
    ``d = log pi_ref - log pi`` (unbiased, always >= 0, lower variance).
    """
    if estimator == "k1":
        return logp - ref_logp
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: Aggregation = "token", constant: float | None = None
) -> torch.Tensor:
    """Reduce ``(B, T)`` per-token losses to a scalar.

    token: sum over all tokens / number of tokens (DAPO); sequence: mean over each
    sequence's tokens, then over sequences (original GRPO); constant: sum /
    (B * constant) with a fixed constant such as the token budget (Dr.GRPO).
    """
    total = (per_token * mask).sum()
    if mode == "token":
        return total / mask.sum().clamp(min=1.0)
    if mode == "sequence":
        per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.mean()
    if constant is None:
        raise ValueError("aggregation 'constant' needs the constant (e.g. the max completion length)")
    return total / (per_token.shape[0] * constant)


def aggregation_weights(
    mask: torch.Tensor, mode: Aggregation, batch_tokens: float, batch_seqs: int, constant: float | None
) -> torch.Tensor:
    """Per-token weights whose weighted sum equals :func:`aggregate` over the WHOLE batch.

    Lets a batch be split into micro-batches (gradient accumulation) without
    changing the loss: each micro-batch contributes ``sum(w * loss)``. ``-> (b, T)``.
    """
    if mode == "token":
        return mask / max(batch_tokens, 1.0)
    if mode == "sequence":
        return mask / mask.sum(-1, keepdim=True).clamp(min=1.0) / batch_seqs
    if constant is None:
        raise ValueError("aggregation 'constant' needs the constant")
    return mask / (batch_seqs * constant)


def phase_aggregation_weights(
    mask: torch.Tensor, mode: Aggregation, phases: Sequence[str], tokens: Mapping[str, float],
    seqs: Mapping[str, int], constant: float | None,
) -> torch.Tensor:
    """Per-token weights that reduce each PHASE over its own tokens / sequences in the whole batch.

    Row ``r`` (phase ``phases[r]``) gets :func:`aggregation_weights` with that phase's batch totals, so
    the weighted sum is ``sum_phase aggregate(phase's per-token losses)``: LSP's
    ``L = L_sol + alpha_ch * L_ch`` with each role's loss its own mean (``alpha_ch`` is the
    challenger samples' ``weight``). Pooled instead (one mean over all tokens), 2 queries x 5
    solvers with 7 challenger and 45 solver tokens weigh the challenger's loss 7/52, not 1.
    Micro-batches add up to the whole batch as with :func:`aggregation_weights`. ``-> (b, T)``.
    """
    rows = [
        aggregation_weights(mask[r : r + 1], mode, tokens[phase], seqs[phase], constant) for r, phase in enumerate(phases)
    ]
    return torch.cat(rows) if rows else mask.clone()


ImportanceMode = Literal["none", "tis", "mis"]


def importance_weights(
    old_logp: torch.Tensor, gen_logp: torch.Tensor, mode: ImportanceMode = "tis", cap: float = 2.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token correction for the gap between the generator that sampled and the learner.

    ``rho = exp(old_logp - gen_logp)``: the learner's probability of the sampled token
    before the update over the generator's sampling probability (an older version of the
    weights with async rollouts, or other numerics: bf16 vLLM against an fp32 learner).

    - ``tis`` (truncated IS, Yao et al. 2025, TIS in verl and slime): ``w = min(rho, cap)``;
    - ``mis`` (masked IS, MIS in verl's rollout correction): ``w = rho`` if ``rho <= cap``, else 0;
    - ``none``: ``w = 1``.

    A token without a generator logprob (``gen_logp`` NaN) gets ``w = 1`` and ``rho = 1``.
    The weights multiply the policy-gradient term per token and carry no gradient.
    ``-> (w, rho)``, both ``(B, T)``.
    """
    missing = gen_logp.isnan()
    rho = torch.exp(old_logp.detach() - gen_logp.nan_to_num(0.0)).masked_fill(missing, 1.0)
    if mode == "none":
        w = torch.ones_like(rho)
    elif mode == "tis":
        w = rho.clamp(max=cap)
    elif mode == "mis":
        w = torch.where(rho <= cap, rho, torch.zeros_like(rho))
    else:
        raise ValueError(f"importance mode {mode!r}: expected none, tis or mis")
    return w, rho


def choice_entropy(own: torch.Tensor, alt_sums: torch.Tensor, owner: Sequence[int]) -> torch.Tensor:
    """Per row, the entropy of the choice the row's reply was drawn from: with ``l_0 = own[r]`` (the chosen
    reply's summed logprob) and ``l_1..l_k`` the sums ``alt_sums[a]`` of the alternatives ``a`` with
    ``owner[a] == r``, ``p = softmax(l)`` and ``H_r = - sum_j p_j log p_j`` (natural log; ``log k+1`` for
    equal scores). Rows without alternatives get 0. ``-> (b,)``, differentiable in ``own`` and ``alt_sums``."""
    rows: dict[int, list[int]] = {}
    for a, r in enumerate(owner):
        rows.setdefault(r, []).append(a)
    out = []
    for r in range(len(own)):
        if r not in rows:
            out.append(own.new_zeros(()))
            continue
        logp = torch.log_softmax(torch.cat([own[r:r + 1], alt_sums[rows[r]].to(own.dtype)]), 0)
        out.append(-(logp.exp() * logp).sum())
    return torch.stack(out)


def normalise_choices(logp: torch.Tensor, mask: torch.Tensor, alt_sums: torch.Tensor, owner: Sequence[int]) -> torch.Tensor:
    """``logp`` (b, T) of chosen replies, normalised over their alternatives: ``alt_sums[a]`` is alternative
    ``a``'s summed logprob ``l_a``, belonging to row ``owner[a]``. Row ``r`` with alternatives gets
    ``- logsumexp(l_r, l_a for a of r)`` added at its last completion token (``mask``'s last 1), where
    ``l_r = sum_t logp[r, t] * mask[r, t]``; the row then sums to ``log softmax(l)_chosen``. Differentiable
    in ``logp`` and ``alt_sums``; rows without alternatives are unchanged."""
    own = (logp * mask).sum(-1)  # (b,)
    rows: dict[int, list[int]] = {}
    for a, r in enumerate(owner):
        rows.setdefault(r, []).append(a)
    shift = torch.stack([torch.logsumexp(torch.cat([own[r:r + 1], alt_sums[rows[r]].to(own.dtype)]), 0)
                         if r in rows else own.new_zeros(()) for r in range(len(own))])
    last = mask.sum(-1).long() - 1  # each row's last completion token
    return logp - torch.zeros_like(logp).scatter(1, last[:, None], shift[:, None])
