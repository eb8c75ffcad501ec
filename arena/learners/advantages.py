"""Advantage maths: small pure functions over a batch and its group ids.

Shapes: ``N`` samples (turns). ``rewards: (N,) float``, ``groups: (N,) long``
(dense group index per sample, from :func:`group_index`), ``games: (N,) long``
(episode index). Every function returns ``(N,)`` tensors. The registered,
config-selectable estimators built on these live in :mod:`arena.learners.estimators`;
hand-computed checks in ``tests/learners/test_advantages.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch


def group_index(keys: Sequence[Mapping[str, str]], by: Sequence[str]) -> torch.Tensor:
    """Dense group ids: samples whose ``keys[by]`` agree share an id. ``-> (N,) long``."""
    ids: dict[tuple[str, ...], int] = {}
    out = [ids.setdefault(tuple(k.get(name, "") for name in by), len(ids)) for k in keys]
    return torch.tensor(out, dtype=torch.long)


def group_mean_std(values: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample mean and population std of the sample's group. ``(N,), (N,) -> (N,), (N,)``."""
    n_groups = int(groups.max()) + 1 if groups.numel() else 0
    count = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, groups, torch.ones_like(values))
    total = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, groups, values)
    mean = (total / count)[groups]
    sq = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, groups, (values - mean) ** 2)
    std = (sq / count).sqrt()[groups]
    return mean, std


def grpo(rewards: torch.Tensor, groups: torch.Tensor, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """GRPO: ``(r - mean_g) / (std_g + eps)``; Dr.GRPO (``scale=False``): ``r - mean_g``."""
    mean, std = group_mean_std(rewards, groups)
    centred = rewards - mean
    return centred / (std + eps) if scale else centred


def zero_variance(rewards: torch.Tensor, groups: torch.Tensor, tol: float = 1e-8) -> torch.Tensor:
    """``(N,) bool``: True where the sample's group has (near) zero reward variance: no signal."""
    _, std = group_mean_std(rewards, groups)
    return std <= tol


RaeOrder = Literal["paper", "code", "spiral"]


def role_advantages(
    rewards: torch.Tensor,
    roles: Sequence[str],
    games: torch.Tensor,
    values: Mapping[str, float],
    alpha: float = 0.9,
    order: RaeOrder = "paper",
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """SpyRL's Role-Advantage Estimation: one EMA baseline per role.

    ``(N,) rewards, N roles, (N,) games, baselines -> (N,) advantages, (N,) keep, new baselines``.

    Each game updates a role's baseline once, with the MEAN reward of that role's
    seats in the game (``b_spy <- a*b_spy + (1-a)*r_u``, ``b_civ <- a*b_civ +
    (1-a)*mean_j r_j``); games are processed in ascending index order, so a later
    game sees the baselines earlier games left. ``order``:

    * ``paper``: advantage ``r - b_role`` with the baseline read BEFORE the game updates it;
    * ``code``: the baseline is updated first, then subtracted, then advantages are
      z-scored within the game (the public code, ``alpha = 0.9``);
    * ``spiral``: SPIRAL's role-conditioned advantage, read before update (its
      ``alpha`` is 0.95); samples with exactly zero advantage are not kept.

    ``values`` is not modified; the updated baselines are returned.
    """
    values = dict(values)
    adv = torch.zeros_like(rewards)
    for g in torch.unique(games, sorted=True).tolist():
        idx = (games == g).nonzero().flatten()
        by_role: dict[str, list[int]] = {}
        for i in idx.tolist():
            by_role.setdefault(roles[i], []).append(i)
        for role, members in by_role.items():
            r_mean = float(rewards[members].mean())
            before = values.get(role, 0.0)
            after = alpha * before + (1 - alpha) * r_mean
            values[role] = after
            baseline = after if order == "code" else before
            adv[members] = rewards[members] - baseline
        if order == "code":
            game_adv = adv[idx]
            adv[idx] = (game_adv - game_adv.mean()) / (game_adv.std(unbiased=False) + eps)
    keep = adv != 0 if order == "spiral" else torch.ones_like(adv, dtype=torch.bool)
    return adv, keep, values


def lsp_solver(rewards: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """LSP solver advantage ``R(q, a_j) - V(q)``, ``V(q)`` the mean over the query's answers (no std)."""
    return grpo(rewards, queries, scale=False)


def lsp_challenger(rewards: torch.Tensor) -> torch.Tensor:
    """LSP challenger advantage: each reward minus the mean over ALL the given turns. ``(Q,) -> (Q,)``.

    The game credits a challenger turn with ``-V(q)`` (LSP-Zero; plus the
    self-reward ``V_Q(q)`` for LSP), so for LSP-Zero this is ``mean_i V(q_i) - V(q)``.
    """
    return rewards - rewards.mean()


def observation_advantages(
    rewards: torch.Tensor,
    observations: Sequence[str],
    groups: torch.Tensor,
    baselines: Mapping[str, float],
    alpha: float = 0.9,
    limit: int = 100_000,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Baselines per observation: ``r - b(o)``, ``b(o)`` a moving average of earlier steps' rewards at ``o``.

    ``(N,) rewards, N observation keys, (N,) groups, baselines -> (N,) advantages, (N,) known, new baselines``.

    A turn at an observation ``o`` that has a baseline gets ``r - b(o)``, with ``b(o)`` as it was BEFORE this
    step (it holds no reward of this step, so it does not depend on the turn's own action: the estimate
    stays unbiased). A turn at an observation seen for the first time gets ``r - mean_g r`` over its group
    ``g`` of this step (``dr_grpo``'s baseline: the fallback), and ``known`` is False for it. Then each
    observation of the step moves: ``b(o) <- alpha b(o) + (1 - alpha) mean_{i at o} r_i``, or
    ``b(o) = mean_{i at o} r_i`` at its first sight. Baselines are kept in the order they were last moved;
    past ``limit`` the least recently moved are forgotten. ``baselines`` is not modified.

    In a game of hidden information the card (the private state) is part of the observation, so each card
    is measured against its own value, not the value of every card alike (a role's or a group's baseline).
    """
    known = torch.tensor([o in baselines for o in observations], dtype=torch.bool)
    group_mean, _ = group_mean_std(rewards, groups)
    own = torch.tensor([baselines.get(o, 0.0) for o in observations], dtype=rewards.dtype)
    adv = rewards - torch.where(known, own, group_mean)
    sums: dict[str, list[float]] = {}
    for o, r in zip(observations, rewards.tolist(), strict=True):
        total = sums.setdefault(o, [0.0, 0.0])
        total[0] += r
        total[1] += 1.0
    out = dict(baselines)
    for o, (total, count) in sums.items():
        mean = total / count
        before = out.pop(o, None)  # re-inserted last: the most recently moved
        out[o] = mean if before is None else alpha * before + (1 - alpha) * mean
    for o in list(out)[: max(0, len(out) - limit)]:
        del out[o]
    return adv, known, out
