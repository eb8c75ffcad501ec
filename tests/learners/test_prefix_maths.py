"""The pure prefix maths (arena/learners/prefix.py) on hand-worked cases: what a group of prompts can
share, what a micro-batch's forward costs, and how rows with a common prefix are packed."""

from __future__ import annotations

import pytest

from arena.learners.prefix import common_prefix, forward_cost, pack_by_prefix, padded_share, shared_prefix_len


def test_common_prefix_and_what_can_be_shared() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0 and common_prefix([1, 2], [1, 2]) == 2
    assert shared_prefix_len([[1, 2, 3, 4]]) == 0  # one row shares with nobody
    assert shared_prefix_len([[1, 2, 3, 4], [1, 2, 3, 4]]) == 3  # identical: every row keeps its last token
    assert shared_prefix_len([[1, 2, 3, 4, 5], [1, 2, 3], [1, 2, 3, 9]]) == 2  # capped by the shortest less one
    assert shared_prefix_len([[5, 1, 2], [1, 2, 3], [1, 2, 4]]) == 0  # the sorted set's ends decide
    assert shared_prefix_len([[1, 2, 3, 7], [1, 2, 3, 8], [1, 2, 3, 9]], min_saved=6) == 3
    assert shared_prefix_len([[1, 2, 3, 7], [1, 2, 3, 8], [1, 2, 3, 9]], min_saved=7) == 0  # saves 3 * 2 = 6


def test_forward_cost_and_padded_share() -> None:
    assert forward_cost([], []) == 0 and padded_share([], []) == 0.0
    assert forward_cost([5, 3], [2, 4]) == 2 * 7  # nothing shared: right-padded to the longest row
    assert forward_cost([5, 3], [1, 2]) == 2 * 6 and forward_cost([2, 6, 3], [5, 1, 1]) == 3 * 7
    assert forward_cost([5, 3], [2, 4], shared=2) == 2 + 2 * (3 + 4)
    assert padded_share([5, 3], [2, 4]) == 0.0
    assert padded_share([5, 3], [1, 2]) == pytest.approx((12 - 11) / 12)
    assert padded_share([5, 5], [4, 4], shared=4) == 0.0
    assert padded_share([5, 3], [2, 4], shared=2) == pytest.approx((16 - 12) / 16)
    # Repeated prompts run once: c + k (P - c) + rows T; one distinct prompt shares no prefix with itself.
    assert forward_cost([9, 9, 8, 9], [2, 1, 3, 2], shared=4, distinct=2) == 4 + 2 * (9 - 4) + 4 * 3
    assert forward_cost([9, 9, 9], [2, 1, 3], shared=8, distinct=1) == 9 + 3 * 3
    assert forward_cost([9, 8], [2, 3], shared=4, distinct=2) == forward_cost([9, 8], [2, 3], shared=4)


def test_a_one_token_prefix_is_shared_at_the_default_threshold() -> None:
    # It saves one position, which is the default min_saved.
    assert shared_prefix_len([[5, 1], [5, 2]]) == 1
    assert pack_by_prefix([[5, 1], [5, 2]], [1, 1], 100) == ([[0, 1]], [])


def test_repeated_prompts_are_costed_once_so_they_share_one_micro_batch() -> None:
    head = [1, 2, 3, 4, 5, 6, 7]
    states = [head + [10, 11, 12], head + [20, 21, 22], head + [30, 31, 32]]
    prompts = [states[i % 3] for i in range(12)]  # 12 rows, 3 information states
    comps = [2] * 12
    # Costed per row, 7 + 12 * (10 - 7 + 2) = 67 > 40 would split them; each state once: 7 + 3 * 3 + 12 * 2 = 40.
    shared, rest = pack_by_prefix(prompts, comps, 40)
    assert shared == [sorted(range(12), key=lambda i: (prompts[i], 0))] and rest == []
    shared, rest = pack_by_prefix(prompts, comps, 39)  # one row over: the last row goes on alone
    assert [len(g) for g in shared] == [11] and len(rest) == 1


def test_pack_by_prefix_keeps_prefix_groups_together_within_the_budget() -> None:
    a = [[1, 2, 3, 4, 5, 6, 7, 10 + k] for k in range(4)]  # share 7 tokens
    b = [[9, 8, 7, 6, 5, 4, 3, 20 + k] for k in range(3)]  # share 7 others
    lone = [[40, 41]]
    prompts = [a[0], b[0], lone[0], a[1], b[1], a[2], b[2], a[3]]
    comps = [2, 3, 1, 4, 2, 1, 2, 3]
    shared, rest = pack_by_prefix(prompts, comps, 10_000, min_saved=1)
    assert sorted(map(sorted, shared)) == [[0, 3, 5, 7], [1, 4, 6]] and rest == [2]
    for g in shared:
        c = shared_prefix_len([prompts[i] for i in g])
        assert c == 7 and forward_cost([len(prompts[i]) for i in g], [comps[i] for i in g], c) <= 10_000
    # A tight budget splits a group, never mixes two; a high threshold shares nothing.
    shared, rest = pack_by_prefix(prompts, comps, 7 + 2 * 5, min_saved=1)
    assert sorted([i for g in shared for i in g] + rest) == list(range(8))
    assert all(len(g) <= 2 for g in shared) and all(len({prompts[i][0] for i in g}) == 1 for g in shared)
    assert pack_by_prefix(prompts, comps, 10_000, min_saved=100) == ([], sorted(range(8), key=lambda i: prompts[i]))


def test_a_row_dearer_together_than_alone_starts_its_own_micro_batch() -> None:
    head = [1, 2, 3, 4, 5, 6, 7]
    prompts = [head + [10], head + [11], head + [12], head + [99] + [50] * 49]  # the last: 49 more tokens
    comps = [1, 1, 1, 1]
    # Together: 7 + 4 * (57 - 7 + 1) = 211 against 7 + 3 * 2 = 13, a rise of 198 > 58, its cost alone.
    assert pack_by_prefix(prompts, comps, 10_000) == ([[0, 1, 2]], [3])
    # 4 more tokens still cost more together: 7 + 4 * (12 - 7 + 1) = 31, a rise of 18 > 13 alone.
    prompts[3] = head + [99] + [50] * 4
    assert pack_by_prefix(prompts, comps, 10_000) == ([[0, 1, 2]], [3])
    prompts[3] = head + [99]  # the same width: a rise of 2 <= 9
    assert pack_by_prefix(prompts, comps, 10_000) == ([[0, 1, 2, 3]], [])
    # Shorter completions of one prompt come after longer ones.
    assert pack_by_prefix([head + [8]] * 3, [1, 3, 2], 10_000) == ([[1, 2, 0]], [])
