"""The regularisers of sampled training where a decision hides information: small pure functions.

Each is a switch of the learner (arena/learners/config.py) and works in both action modes. A row
chosen among choices (``action_mode: score``, a sample with ``alternatives``) is one decision over
its legal choices, with ``l_j`` each choice's summed completion log-probability and the policy
``pi = softmax(l)``; a row written freely (generation) is a sequence of decisions, one per
completion token, each over the whole vocabulary.

- :func:`choice_log_softmax` lays each row's choice distribution out as a table, the chosen reply
  in column 0 and its alternatives after it in their order;
- :func:`choice_kl`: ``KL(pi || rho) = sum_j pi_j (log pi_j - log rho_j)`` over a row's choices,
  exact (the magnet, ``learner.magnet``; Sokota et al., 2022, arXiv 2206.05825);
- :func:`token_entropy`: ``H_t = - sum_v p_tv log p_tv`` at each completion position, over the
  whole vocabulary (``learner.token_entropy``; the choice's own is ``losses.choice_entropy``);
- :func:`decision_probabilities` and :func:`bound_keep`: the per-decision trust region
  (``learner.bound``), which stops a sample's policy-gradient push once its decision's probability
  has moved ``move`` from its value before the update, or sits within ``saturation`` of 0 or 1.

Shapes: ``b`` rows, ``T`` completion positions, ``V`` vocabulary, ``K`` the most choices of a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def choice_log_softmax(own: torch.Tensor, alt_sums: torch.Tensor, owner: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's choice distribution ``log softmax(l)`` as a table ``(b, K)``, and which cells are choices.

    Row ``r``'s column 0 is its own reply (``l_0 = own[r]``), columns ``1..k`` the alternatives ``a`` with
    ``owner[a] == r`` in their order (``l = alt_sums[a]``); ``K`` is one more than the most alternatives
    of a row. Cells past a row's choices, and every cell of a row without alternatives, are not choices:
    ``valid`` is False there and their value is 0 (so no NaN reaches a gradient). Differentiable in
    ``own`` and ``alt_sums``. ``-> (logq (b, K), valid (b, K) bool)``."""
    b = own.shape[0]
    cols: list[int] = []
    count: dict[int, int] = {}
    for r in owner:
        count[r] = count.get(r, 0) + 1
        cols.append(count[r])
    k = 1 + max(count.values(), default=0)
    valid = torch.zeros(b, k, dtype=torch.bool, device=own.device)
    has = torch.tensor(sorted(count), dtype=torch.long, device=own.device)
    valid[has, 0] = True
    rows_t = torch.tensor(list(owner), dtype=torch.long, device=own.device)
    cols_t = torch.tensor(cols, dtype=torch.long, device=own.device)
    valid[rows_t, cols_t] = True
    table = torch.full((b, k), float("-inf"), dtype=own.dtype, device=own.device)
    table = table.index_put((has, torch.zeros_like(has)), own[has])
    table = table.index_put((rows_t, cols_t), alt_sums.to(own.dtype))
    table = table.masked_fill(~valid.any(-1, keepdim=True) & (torch.arange(k, device=own.device) == 0), 0.0)
    return torch.log_softmax(table, -1).masked_fill(~valid, 0.0), valid


def choice_kl(logq: torch.Tensor, logq_ref: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``KL(pi || rho) = sum_j pi_j (log pi_j - log rho_j)`` per row over its choices (:func:`choice_log_softmax`
    tables of the policy, with gradient, and of ``rho``); 0 for a row without choices. Exact: the
    alternatives are scored anyway, so no sampled estimate is needed. ``(b, K) x 3 -> (b,)``."""
    p = logq.exp() * valid
    return (p * (logq - logq_ref).masked_fill(~valid, 0.0)).sum(-1)


def token_entropy(logp: torch.Tensor) -> torch.Tensor:
    """``H_t = - sum_v p_tv log p_tv`` at each completion position, from the log-softmax over the whole
    vocabulary (natural log; a token of probability 0 adds 0). ``(b, T, V) -> (b, T)``."""
    p = logp.exp()
    return -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)


def decision_probabilities(
    logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, is_choice: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The probability of each token's decision now and before the update, ``(b, T)`` each, no gradient.

    A chosen reply (``is_choice``, its ``logp`` normalised over its choices: the row sums to
    ``log P(chosen)``) is one decision: every one of its tokens gets ``P(chosen) = exp(sum_t logp * mask)``.
    A generated reply's token ``t`` is its own decision: ``exp(logp_t)``. ``old_logp`` likewise."""
    def probs(lp: torch.Tensor) -> torch.Tensor:
        lp = lp.detach()
        row = (lp * mask).sum(-1, keepdim=True).exp().expand_as(lp)
        return torch.where(is_choice[:, None], row, lp.exp())

    return probs(logp), probs(old_logp)


def bound_keep(p: torch.Tensor, p0: torch.Tensor, adv: torch.Tensor, move: float, saturation: float) -> torch.Tensor:
    """Where a sample's policy-gradient push still acts: False where it would move its decision further out.

    ``p``, ``p0``: the decision's probability now and before the update (:func:`decision_probabilities`);
    ``adv``: the advantage at each token (a positive one raises ``p``). Stopped (False):

    - ``move > 0``: ``adv > 0`` and ``p - p0 > move``, or ``adv < 0`` and ``p0 - p > move``: the epochs over
      this batch have already moved the probability ``move`` in the advantage's direction;
    - ``saturation > 0``: ``adv > 0`` and ``p >= 1 - saturation``, or ``adv < 0`` and ``p <= saturation``
      (exploitability descent's ``descent_bound``, NeuRD's threshold on probabilities, here on sampled rows).

    Zero ``move`` and ``saturation`` keep everything. ``(b, T) x 3 -> (b, T) bool``."""
    up, down = adv > 0, adv < 0
    stop = torch.zeros_like(up)
    if move > 0:
        stop = stop | (up & (p - p0 > move)) | (down & (p0 - p > move))
    if saturation > 0:
        stop = stop | (up & (p >= 1.0 - saturation)) | (down & (p <= saturation))
    return ~stop
