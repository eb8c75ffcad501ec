"""Advantage estimators against hand-computed values and slow reference loops."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from arena.learners.advantages import group_index, grpo, lsp_challenger, lsp_solver, role_advantages, zero_variance
from tolerance import approx32


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
        assert float(fast[i]) == approx32((r - mean) / (std + 1e-6))


GAMES = torch.tensor([0, 0, 0, 1, 1, 1])
ROLES = ["spy", "civilian", "civilian", "spy", "civilian", "civilian"]


def test_rae_paper_reads_baseline_before_update() -> None:
    # game 0: spy -0.2, civilians 0.1, 0.3 ; game 1: spy 0.4, civilians -0.2, 0.0
    rewards = t(-0.2, 0.1, 0.3, 0.4, -0.2, 0.0)
    start = {"spy": 0.0}
    adv, keep, values = role_advantages(rewards, ROLES, GAMES, start, alpha=0.75, order="paper")
    # game 0 reads b = 0; then b_spy = 0.25*-0.2 = -0.05, b_civ = 0.25*0.2 = 0.05; game 1 subtracts those.
    assert adv.tolist() == pytest.approx([-0.2, 0.1, 0.3, 0.45, -0.25, -0.05])
    assert values == pytest.approx({"spy": 0.75 * -0.05 + 0.25 * 0.4, "civilian": 0.75 * 0.05 + 0.25 * -0.1})
    assert keep.all() and start == {"spy": 0.0}, "the input baselines are not modified"


def test_rae_code_updates_first_then_zscores_the_game() -> None:
    rewards = t(-0.3, 0.1, 0.2)
    adv, _, values = role_advantages(rewards, ["spy", "civilian", "civilian"], torch.tensor([0, 0, 0]), {}, 0.9, "code")
    b_spy, b_civ = 0.1 * -0.3, 0.1 * 0.15
    raw = torch.tensor([-0.3 - b_spy, 0.1 - b_civ, 0.2 - b_civ], dtype=torch.float64)
    expected = (raw - raw.mean()) / (raw.std(unbiased=False) + 1e-6)
    assert adv.tolist() == pytest.approx(expected.tolist())
    assert values == pytest.approx({"spy": b_spy, "civilian": b_civ})


def test_rae_spiral_drops_zero_advantages() -> None:
    adv, keep, _ = role_advantages(t(0.0, 0.5), ["spy", "civilian"], torch.tensor([0, 0]), {}, 0.95, "spiral")
    assert adv.tolist() == [0.0, 0.5] and keep.tolist() == [False, True]


def test_rae_matches_a_reference_loop() -> None:
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(30, generator=gen, dtype=torch.float64) - 0.5
    games = torch.arange(30) // 5
    roles = ["spy" if i % 5 == 2 else "civilian" for i in range(30)]
    adv, _, values = role_advantages(rewards, roles, games, {"spy": 0.1}, alpha=0.8, order="paper")
    b = {"spy": 0.1, "civilian": 0.0}
    for g in range(6):
        idx = [i for i in range(30) if int(games[i]) == g]
        for role in ("civilian", "spy"):
            members = [i for i in idx if roles[i] == role]
            for i in members:
                assert float(adv[i]) == pytest.approx(float(rewards[i]) - b[role])
            b[role] = 0.8 * b[role] + 0.2 * sum(float(rewards[i]) for i in members) / len(members)
    assert values == pytest.approx(b)


def test_lsp_solver_and_challenger() -> None:
    rewards, queries = t(1, 3, 0, 0, 6), torch.tensor([0, 0, 1, 1, 1])
    assert lsp_solver(rewards, queries).tolist() == pytest.approx([-1, 1, -2, -2, 4])
    # challenger rewards -V(q) for V = 2, 5, 8: advantage mean V - V(q)
    assert lsp_challenger(t(-2, -5, -8)).tolist() == pytest.approx([3, 0, -3])
    # LSP: rewards -V + V_Q = -1, -4, -4 (mean -3)
    assert lsp_challenger(t(-1, -4, -4)).tolist() == pytest.approx([2, -1, -1])
