"""Ratings from finished games: Bradley-Terry with bootstrap intervals, openskill, payoffs, cycles.

Pure: the input is a list of :class:`GameResult` (which player sat in which
seat, with which role, and the seat's rank from ``LLMGame.outcome()``); no
model, no env. Tournaments and the league both read these functions.

Pairwise results
    A game with seats ranked by ``outcome()`` implies, for every two seats held
    by *different* players, a pairwise result: the better rank scores 1, the
    worse 0, equal ranks 0.5 each. One game contributes one result per such
    pair of seats (a 4-seat game between 4 players gives 6).

Bradley-Terry (the reported figure)
    ``P(i beats j) = sigmoid(theta_i - theta_j)``. theta minimises the logistic
    loss ``-sum_results [y log s(d) + (1 - y) log s(-d)]`` (ties count y = 0.5)
    plus a tiny ridge ``ridge/2 * |theta|^2`` that keeps the fit finite when a
    player wins every game, by ``scipy.optimize.minimize`` (L-BFGS-B, analytic
    gradient), with the anchor's theta fixed at 0. Ratings are on the Elo
    scale, ``R_i = 1000 + theta_i * 400 / ln 10`` (a 400-point gap: 10-to-1
    odds), anchored so the named player is exactly 1000.
    Intervals: 95% percentile bootstrap over GAMES (resample the games with
    replacement, refit, take the 2.5th and 97.5th percentiles), as the Chatbot
    Arena leaderboard computes them. The refits minimise the same loss by
    batched Newton steps (all resamples at once, from the full fit), which
    the tests check against scipy's answer.

Online ratings
    ``openskill``'s Plackett-Luce model (multiplayer, teams, uncertainty), one
    update per game in order. Each distinct player at a table is one team whose
    rank is the mean of its seats' ranks; reported as mu, sigma and the
    conservative ``ordinal = mu - 3 sigma``.

Payoff matrix
    ``P[i, j]`` = mean pairwise score of i against j over all their meetings
    (NaN when they never met); per role: only the results where i held that role.

Non-transitive cycles
    Graph with an edge ``i -> j`` when i beats j with significance: over the
    games where both played, the games i won head-to-head (its mean pairwise
    score against j in that game above 0.5) against those it lost, two-sided
    binomial test (``scipy.stats.binomtest``) at ``alpha``, and i won more.
    Cycles are ``networkx.simple_cycles`` of that graph; a transitive field has none.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ELO_SCALE = 400.0 / math.log(10.0)
ELO_BASE = 1000.0


@dataclass(frozen=True)
class SeatResult:
    """One seat of a finished game."""

    player: str
    rank: int
    role: str = "player"
    score: float = 0.0


@dataclass(frozen=True)
class GameResult:
    """A finished game as ratings see it: its seats, each with a player and a rank."""

    seats: tuple[SeatResult, ...]

    @property
    def players(self) -> list[str]:
        return list(dict.fromkeys(s.player for s in self.seats))


def game_from_outcome(seating: dict[str, str], roles: dict[str, str], outcome: dict[str, Any]) -> GameResult:
    """A :class:`GameResult` from seat -> player, seat -> role and ``outcome()`` (SeatOutcome or dicts)."""
    seats = []
    for seat, player in seating.items():
        if seat not in outcome:
            continue
        o = outcome[seat]
        rank, score = (o["rank"], o["score"]) if isinstance(o, dict) else (o.rank, o.score)
        seats.append(SeatResult(player=player, rank=int(rank), role=roles.get(seat, "player"), score=float(score)))
    return GameResult(tuple(seats))


def pairwise(game: GameResult) -> list[tuple[str, str, float, str]]:
    """(player i, player j, score of i, role of i) for every ordered pair of seats of different players."""
    out = []
    for a in game.seats:
        for b in game.seats:
            if a is not b and a.player != b.player:
                y = 1.0 if a.rank < b.rank else 0.0 if a.rank > b.rank else 0.5
                out.append((a.player, b.player, y, a.role))
    return out


def win_tensor(games: Sequence[GameResult], players: Sequence[str]) -> np.ndarray:
    """Per game g: W[g, i, j] = pairwise score i earned against j in g (each unordered pair once per seat pair)."""
    index = {p: k for k, p in enumerate(players)}
    w = np.zeros((len(games), len(players), len(players)))
    for g, game in enumerate(games):
        for i, j, y, _ in pairwise(game):
            w[g, index[i], index[j]] += y
    return w


def _fit_theta(wins: np.ndarray, anchor: int, ridge: float) -> np.ndarray:
    """theta (anchor = 0) minimising the BT logistic loss for the win matrix ``wins[i, j]``."""
    from scipy.optimize import minimize

    n = wins.shape[0]
    free = [k for k in range(n) if k != anchor]

    def loss(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta = np.zeros(n)
        theta[free] = x
        d = theta[:, None] - theta[None, :]
        # wins[i, j] * -log sigmoid(theta_i - theta_j), summed; logaddexp keeps it stable
        value = float(np.sum(wins * np.logaddexp(0.0, -d))) + 0.5 * ridge * float(x @ x)
        p = 1.0 / (1.0 + np.exp(d))  # sigmoid(-d) = d/d(d) of -log sigmoid(d), with a minus sign
        g = wins * p
        grad_theta = -(g.sum(axis=1) - g.sum(axis=0))
        return value, grad_theta[free] + ridge * x

    res = minimize(loss, np.zeros(n - 1), jac=True, method="L-BFGS-B")
    theta = np.zeros(n)
    theta[free] = res.x
    return theta


def newton_fit(wins: np.ndarray, anchor: int, ridge: float, start: np.ndarray, iters: int = 50) -> np.ndarray:
    """The same minimiser as :func:`_fit_theta` for a batch of win matrices ``wins[r, i, j]`` at once
    (damped Newton steps from ``start``): the bootstrap's thousand refits in milliseconds."""
    r, n = wins.shape[0], wins.shape[1]
    free = np.array([k for k in range(n) if k != anchor])
    theta = np.repeat(start[None, :], r, axis=0).astype(float)
    both = wins + wins.transpose(0, 2, 1)  # games between i and j, whoever won
    for _ in range(iters):
        d = theta[:, :, None] - theta[:, None, :]
        s = 1.0 / (1.0 + np.exp(-d))
        grad = (both * s).sum(axis=2) - wins.sum(axis=2) + ridge * theta  # d loss / d theta
        h = both * s * (1.0 - s)
        hess = -h + np.eye(n)[None] * (h.sum(axis=2)[:, :, None] + ridge)
        gf, hf = grad[:, free], hess[:, free][:, :, free]
        step = np.linalg.solve(hf + 1e-9 * np.eye(len(free))[None], gf[..., None])[..., 0]
        theta[:, free] -= np.clip(step, -2.0, 2.0)  # damped: a far start cannot overshoot
        if np.max(np.abs(step)) < 1e-9:
            break
    return theta


@dataclass
class Ratings:
    """Bradley-Terry ratings (Elo scale) with 95% bootstrap intervals."""

    players: list[str]
    anchor: str
    rating: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    games: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {p: {"rating": self.rating[p], "low": self.low[p], "high": self.high[p], "games": self.games.get(p, 0)}
                for p in self.players} | {"_anchor": self.anchor}  # type: ignore[operator]


def bradley_terry(
    games: Sequence[GameResult],
    players: Sequence[str],
    anchor: str | None = None,
    rounds: int = 1000,
    seed: int = 0,
    ridge: float = 1e-4,
) -> Ratings:
    """Fit BT on all games, and its 95% interval from ``rounds`` bootstrap resamples of the games."""
    players = list(players)
    anchor = anchor if anchor is not None else players[0]
    if anchor not in players:
        raise ValueError(f"anchor {anchor!r} is not a player ({', '.join(players)})")
    a = players.index(anchor)
    per_game = win_tensor(games, players)
    total = per_game.sum(axis=0)
    theta = _fit_theta(total, a, ridge)
    rng = np.random.default_rng(seed)
    low, high = theta, theta
    if rounds and games:
        counts = np.stack([np.bincount(rng.integers(0, len(games), len(games)), minlength=len(games))
                           for _ in range(rounds)])
        boots = newton_fit(np.tensordot(counts, per_game, axes=1), a, ridge, start=theta)
        low, high = np.percentile(boots, [2.5, 97.5], axis=0)
    played = {p: sum(p in g.players for g in games) for p in players}

    def elo(x: np.ndarray) -> dict[str, float]:
        return {p: ELO_BASE + float(v) * ELO_SCALE for p, v in zip(players, x, strict=True)}

    return Ratings(players, anchor, elo(theta), elo(low), elo(high), played)


def online_ratings(games: Sequence[GameResult], players: Sequence[str]) -> dict[str, dict[str, float]]:
    """openskill Plackett-Luce, one update per game: player -> {mu, sigma, ordinal}."""
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    table = {p: model.rating(name=p) for p in players}
    for game in games:
        names = game.players
        if len(names) < 2:
            continue
        ranks = [float(np.mean([s.rank for s in game.seats if s.player == p])) for p in names]
        new = model.rate([[table[p]] for p in names], ranks=ranks)
        for p, team in zip(names, new, strict=True):
            table[p] = team[0]
    return {p: {"mu": r.mu, "sigma": r.sigma, "ordinal": r.mu - 3 * r.sigma} for p, r in table.items()}


def payoff_matrix(games: Sequence[GameResult], players: Sequence[str], role: str | None = None) -> np.ndarray:
    """P[i, j]: mean pairwise score of i against j (only where i held ``role``, if given); NaN if none."""
    index = {p: k for k, p in enumerate(players)}
    total = np.zeros((len(players), len(players)))
    count = np.zeros_like(total)
    for game in games:
        for i, j, y, r in pairwise(game):
            if role is None or r == role:
                total[index[i], index[j]] += y
                count[index[i], index[j]] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def roles_of(games: Sequence[GameResult]) -> list[str]:
    return sorted({s.role for g in games for s in g.seats})


def head_to_head(games: Sequence[GameResult], players: Sequence[str]) -> dict[tuple[str, str], tuple[int, int]]:
    """(i, j) -> (games i won head-to-head, games it lost) over the games both played."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for game in games:
        scores: dict[tuple[str, str], list[float]] = defaultdict(list)
        for i, j, y, _ in pairwise(game):
            scores[(i, j)].append(y)
        for pair, ys in scores.items():
            mean = float(np.mean(ys))
            if mean > 0.5:
                out[pair][0] += 1
            elif mean < 0.5:
                out[pair][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def beats_graph(games: Sequence[GameResult], players: Sequence[str], alpha: float = 0.05) -> Any:
    """networkx DiGraph: i -> j when i beats j with significance (binomial test on head-to-head games)."""
    import networkx as nx
    from scipy.stats import binomtest

    graph = nx.DiGraph()
    graph.add_nodes_from(players)
    for (i, j), (won, lost) in head_to_head(games, players).items():
        if won > lost and binomtest(won, won + lost, 0.5).pvalue < alpha:
            graph.add_edge(i, j, won=won, lost=lost)
    return graph


def cycles(games: Sequence[GameResult], players: Sequence[str], alpha: float = 0.05, limit: int = 20) -> list[list[str]]:
    """Non-transitive cycles of the significant "beats" graph (each starts at its first player in order)."""
    import networkx as nx

    order = {p: k for k, p in enumerate(players)}
    found = []
    for cyc in nx.simple_cycles(beats_graph(games, players, alpha)):
        k = min(range(len(cyc)), key=lambda n: order[cyc[n]])
        found.append(cyc[k:] + cyc[:k])
        if len(found) >= limit:
            break
    return sorted(found, key=lambda c: (len(c), [order[p] for p in c]))
