"""arena.stats.ratings: Bradley-Terry recovery and coverage, openskill, payoff matrices, cycles (pure, no model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena.stats.ratings import (
    ELO_SCALE,
    GameResult,
    SeatResult,
    bradley_terry,
    cycles,
    _fit_theta,
    game_from_outcome,
    newton_fit,
    online_ratings,
    pairwise,
    payoff_matrix,
)
from tolerance import close32, within


def duel(a: str, b: str, a_wins: bool | None, roles: tuple[str, str] = ("player", "player")) -> GameResult:
    ra, rb = (1, 2) if a_wins else (2, 1) if a_wins is False else (1, 1)
    return GameResult((SeatResult(a, ra, roles[0]), SeatResult(b, rb, roles[1])))


def synthetic(strength: dict[str, float], games_per_pair: int, rng: np.random.Generator) -> list[GameResult]:
    """Two-player games whose winner follows Bradley-Terry with ``strength`` (Elo points)."""
    names = list(strength)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = 1 / (1 + math.exp(-(strength[a] - strength[b]) / ELO_SCALE))
            out += [duel(a, b, bool(rng.random() < p)) for _ in range(games_per_pair)]
    return out


def test_pairwise_from_ranks_counts_ties_as_half_and_skips_own_seats():
    g = GameResult((SeatResult("a", 1), SeatResult("b", 2), SeatResult("b", 2), SeatResult("c", 2)))
    pairs = {(i, j): y for i, j, y, _ in pairwise(g)}
    assert pairs[("a", "b")] == 1.0 and pairs[("b", "a")] == 0.0 and pairs[("b", "c")] == 0.5
    assert len(pairwise(g)) == 2 * (3 + 2)  # a-b twice, a-c, b-c twice; never b-b


def test_game_from_outcome_reads_ranks_per_seat():
    g = game_from_outcome({"s0": "x", "s1": "y"}, {"s0": "spy"}, {"s0": {"rank": 2, "score": 0.0},
                                                                   "s1": {"rank": 1, "score": 1.0}})
    assert [(s.player, s.rank, s.role) for s in g.seats] == [("x", 2, "spy"), ("y", 1, "player")]


def test_bt_matches_closed_form_for_two_players():
    # 30 wins to 10: theta = ln(3), i.e. 400*log10(3) = 190.8 Elo points above the anchor.
    games = [duel("a", "b", True)] * 30 + [duel("a", "b", False)] * 10
    r = bradley_terry(games, ["b", "a"], anchor="b", rounds=0)
    assert r.rating["b"] == 1000.0
    assert r.rating["a"] == within(1000 + 400 * math.log10(3), 0.5, "an iterative fit to 1e-4")


def test_bootstrap_refits_agree_with_scipy():
    rng = np.random.default_rng(3)
    wins = rng.integers(0, 20, size=(5, 4, 4)).astype(float)
    for w in wins:
        np.fill_diagonal(w, 0)
    batched = newton_fit(wins, 1, 1e-4, start=np.zeros(4))
    for w, theta in zip(wins, batched, strict=True):
        close32(theta, _fit_theta(w, 1, 1e-4))


def test_bt_recovers_known_strengths_inside_intervals_in_90_percent_of_50_trials():
    truth = {"anchor": 0.0, "p1": 150.0, "p2": -100.0, "p3": 300.0}
    inside = {p: 0 for p in truth if p != "anchor"}
    for trial in range(50):
        games = synthetic(truth, 40, np.random.default_rng(trial))
        r = bradley_terry(games, list(truth), anchor="anchor", rounds=200, seed=trial)
        for p in inside:
            inside[p] += r.low[p] <= 1000 + truth[p] <= r.high[p]
    # each known strength lies inside its own interval in at least 45 of the 50 trials
    assert all(k >= 45 for k in inside.values()), inside


def test_online_ratings_order_players_by_strength():
    games = synthetic({"weak": -400.0, "mid": 0.0, "strong": 400.0}, 30, np.random.default_rng(0))
    table = online_ratings(games, ["weak", "mid", "strong"])
    assert table["strong"]["mu"] > table["mid"]["mu"] > table["weak"]["mu"]
    assert all(v["sigma"] < 25 / 3 for v in table.values())  # games reduce the uncertainty


def test_online_ratings_take_multiplayer_games():
    game = GameResult(tuple(SeatResult(p, r) for p, r in [("a", 1), ("b", 2), ("c", 3), ("d", 3)]))
    table = online_ratings([game] * 5, ["a", "b", "c", "d"])
    assert table["a"]["mu"] > table["b"]["mu"] > table["c"]["mu"]
    assert table["c"]["mu"] == pytest.approx(table["d"]["mu"])


def test_payoff_matrix_overall_and_per_role():
    games = [duel("a", "b", True, ("spy", "civilian")), duel("a", "b", False, ("civilian", "spy")),
             duel("a", "b", True, ("civilian", "spy"))]
    p = payoff_matrix(games, ["a", "b"])
    assert p[0, 1] == pytest.approx(2 / 3) and p[1, 0] == pytest.approx(1 / 3) and np.isnan(p[0, 0])
    assert payoff_matrix(games, ["a", "b"], role="spy")[0, 1] == 1.0
    assert payoff_matrix(games, ["a", "b"], role="civilian")[0, 1] == 0.5


def rps_field(rng: np.random.Generator, n: int = 30) -> list[GameResult]:
    # rock beats scissors, scissors beats paper, paper beats rock, 90% of the time
    out = []
    for a, b in [("rock", "scissors"), ("scissors", "paper"), ("paper", "rock")]:
        out += [duel(a, b, bool(rng.random() < 0.9)) for _ in range(n)]
    return out


def test_planted_rock_paper_scissors_cycle_is_found():
    assert cycles(rps_field(np.random.default_rng(1)), ["rock", "paper", "scissors"]) == [["rock", "scissors", "paper"]]


def test_transitive_field_has_no_cycle():
    games = synthetic({"a": 0.0, "b": 300.0, "c": 600.0, "d": 900.0}, 30, np.random.default_rng(2))
    assert cycles(games, ["a", "b", "c", "d"]) == []


def test_unknown_anchor_is_an_error():
    with pytest.raises(ValueError, match="anchor"):
        bradley_terry([duel("a", "b", True)], ["a", "b"], anchor="zzz")
