"""Advantage estimators: small pure functions over a batch and its group keys.

Shapes: ``N`` samples (turns). ``rewards: (N,) float``, ``groups: (N,) long``
(dense group index per sample, from :func:`group_index`). Every estimator
returns ``(N,)`` advantages. Hand-computed checks live in
``tests/learners/test_advantages.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


@dataclass
class RoleBaselines:
    """SpyRL's Role-Advantage Estimation: one EMA baseline per role. Training state (checkpointed).

    ``order``:
      * ``paper``: advantage ``r - b_role`` with the baseline read BEFORE this game updates it;
      * ``code``: the baseline is updated first, then subtracted, then advantages are
        z-scored within the game (public code, ``alpha = 0.9``);
      * ``spiral``: SPIRAL's role-conditioned advantage: read before update (``alpha = 0.95``);
        zero advantages are reported by :meth:`advantages` via the returned mask.

    Each game updates a role's baseline once, with the MEAN reward of that role's
    seats in the game (``b_spy <- a*b_spy + (1-a)*r_u``,
    ``b_civ <- a*b_civ + (1-a)*mean_j r_j``). Games are processed in batch order.
    """

    alpha: float = 0.9
    order: RaeOrder = "paper"
    values: dict[str, float] = field(default_factory=dict)

    def advantages(
        self, rewards: torch.Tensor, roles: Sequence[str], games: torch.Tensor, eps: float = 1e-6
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N,), N roles, (N,) game ids -> (N,) advantages, (N,) keep-mask``."""
        adv = torch.zeros_like(rewards)
        for g in torch.unique(games, sorted=True).tolist():
            idx = (games == g).nonzero().flatten()
            by_role: dict[str, list[int]] = {}
            for i in idx.tolist():
                by_role.setdefault(roles[i], []).append(i)
            for role, members in by_role.items():
                r_mean = float(rewards[members].mean())
                before = self.values.get(role, 0.0)
                after = self.alpha * before + (1 - self.alpha) * r_mean
                self.values[role] = after
                baseline = after if self.order == "code" else before
                adv[members] = rewards[members] - baseline
            if self.order == "code":
                game_adv = adv[idx]
                adv[idx] = (game_adv - game_adv.mean()) / (game_adv.std(unbiased=False) + eps)
        keep = adv != 0 if self.order == "spiral" else torch.ones_like(adv, dtype=torch.bool)
        return adv, keep

    def state_dict(self) -> dict[str, object]:
        return {"alpha": self.alpha, "order": self.order, "values": dict(self.values)}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self.alpha = float(state["alpha"])  # type: ignore[arg-type]
        self.order = state["order"]  # type: ignore[assignment]
        self.values = dict(state["values"])  # type: ignore[arg-type]


def lsp_solver(rewards: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """LSP solver advantage ``R(q, a_j) - V(q)``, ``V(q)`` the mean over the query's answers (no std)."""
    return grpo(rewards, queries, scale=False)


def lsp_query_values(rewards: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """``V(q)`` per query: ``(N,) answers -> (Q,)`` mean reward of each query's answers."""
    n = int(queries.max()) + 1
    total = torch.zeros(n, dtype=rewards.dtype).index_add_(0, queries, rewards)
    count = torch.zeros(n, dtype=rewards.dtype).index_add_(0, queries, torch.ones_like(rewards))
    return total / count


def lsp_challenger(values: torch.Tensor, self_reward: torch.Tensor | None = None) -> torch.Tensor:
    """LSP challenger advantage over the step's ``Q`` queries. ``(Q,) -> (Q,)``.

    Challenger reward ``-V(q)`` (plus ``V_Q(q)`` for LSP, given as ``self_reward``);
    advantage = reward minus its mean over the queries, i.e. ``mean_i V(q_i) - V(q)``
    for LSP-Zero.
    """
    reward = -values if self_reward is None else -values + self_reward
    return reward - reward.mean()
