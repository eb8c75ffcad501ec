"""Advantage estimators against hand-computed values and slow reference loops."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from learners.advantages import (
    RoleBaselines,
    group_index,
    grpo,
    lsp_challenger,
    lsp_query_values,
    lsp_solver,
    zero_variance,
)


def t(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float64)


def test_group_index_from_keys() -> None:
    keys = [{"episode": "a", "phase": "vote"}, {"episode": "b", "phase": "vote"}, {"episode": "a", "phase": "vote"}]
    assert group_index(keys, ["episode", "phase"]).tolist() == [0, 1, 0]
    assert group_index(keys, ["phase"]).tolist() == [0, 0, 0]


def test_grpo_hand_computed() -> None:
    # group 0: rewards 1, 0 -> mean 0.5, std 0.5 -> +1, -1; group 1: 2, 2, 5 -> mean 3, std sqrt(2)
    adv = grpo(t(1, 0, 2, 2, 5), torch.tensor([0, 0, 1, 1, 1]), eps=0.0)
    s = math.sqrt(2)
    assert adv.tolist() == pytest.approx([1, -1, -1 / s, -1 / s, 2 / s])
    dr = grpo(t(1, 0, 2, 2, 5), torch.tensor([0, 0, 1, 1, 1]), scale=False)
    assert dr.tolist() == pytest.approx([0.5, -0.5, -1, -1, 2])


def test_zero_variance_groups() -> None:
    assert zero_variance(t(1, 1, 0, 2), torch.tensor([0, 0, 1, 1])).tolist() == [True, True, False, False]


@given(st.lists(st.tuples(st.integers(0, 4), st.floats(-10, 10)), min_size=1, max_size=40))
def test_grpo_matches_a_reference_loop(data: list[tuple[int, float]]) -> None:
    labels = sorted({g for g, _ in data})
    groups = torch.tensor([labels.index(g) for g, _ in data])
    rewards = torch.tensor([r for _, r in data], dtype=torch.float64)
    fast = grpo(rewards, groups)
    for i, (g, r) in enumerate(data):
        members = [x for h, x in data if h == g]
        mean = sum(members) / len(members)
        std = math.sqrt(sum((x - mean) ** 2 for x in members) / len(members))
        assert float(fast[i]) == pytest.approx((r - mean) / (std + 1e-6), abs=1e-6)


def test_rae_paper_reads_baseline_before_update() -> None:
    rae = RoleBaselines(alpha=0.5, order="paper")
    # game 0: spy -0.2, civilians 0.1, 0.1 ; game 1: spy 0.4, civilians -0.2, 0.0
    rewards = t(-0.2, 0.1, 0.1, 0.4, -0.2, 0.0)
    roles = ["spy", "civilian", "civilian", "spy", "civilian", "civilian"]
    adv, keep = rae.advantages(rewards, roles, torch.tensor([0, 0, 0, 1, 1, 1]))
    # game 0 uses b = 0; then b_spy = -0.1, b_civ = 0.05; game 1 subtracts those.
    assert adv.tolist() == pytest.approx([-0.2, 0.1, 0.1, 0.5, -0.25, -0.05])
    assert rae.values == pytest.approx({"spy": 0.5 * -0.1 + 0.5 * 0.4, "civilian": 0.5 * 0.05 + 0.5 * -0.1})
    assert keep.all()


def test_rae_code_updates_first_then_zscores_the_game() -> None:
    rae = RoleBaselines(alpha=0.9, order="code")
    rewards = t(-0.3, 0.1, 0.2)
    adv, _ = rae.advantages(rewards, ["spy", "civilian", "civilian"], torch.tensor([0, 0, 0]))
    b_spy, b_civ = 0.1 * -0.3, 0.1 * 0.15
    raw = torch.tensor([-0.3 - b_spy, 0.1 - b_civ, 0.2 - b_civ], dtype=torch.float64)
    expected = (raw - raw.mean()) / (raw.std(unbiased=False) + 1e-6)
    assert adv.tolist() == pytest.approx(expected.tolist())


def test_rae_spiral_drops_zero_advantages() -> None:
    rae = RoleBaselines(alpha=0.95, order="spiral")
    adv, keep = rae.advantages(t(0.0, 0.5), ["spy", "civilian"], torch.tensor([0, 0]))
    assert adv.tolist() == [0.0, 0.5] and keep.tolist() == [False, True]


def test_rae_state_round_trip() -> None:
    a = RoleBaselines(alpha=0.8, order="code", values={"spy": -0.1})
    b = RoleBaselines()
    b.load_state_dict(a.state_dict())
    assert b == a


def test_lsp_solver_and_challenger() -> None:
    rewards, queries = t(1, 3, 0, 0, 6), torch.tensor([0, 0, 1, 1, 1])
    assert lsp_solver(rewards, queries).tolist() == pytest.approx([-1, 1, -2, -2, 4])
    values = lsp_query_values(rewards, queries)
    assert values.tolist() == pytest.approx([2, 2])
    v = t(2, 5, 8)
    assert lsp_challenger(v).tolist() == pytest.approx([3, 0, -3])  # mean V - V(q)
    # rewards -V + V_Q = -1, -4, -4 (mean -3)
    assert lsp_challenger(v, self_reward=t(1, 1, 4)).tolist() == pytest.approx([2, -1, -1])
