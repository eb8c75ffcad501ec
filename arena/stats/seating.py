"""Seating for tournaments: who sits where, in a seeded schedule balanced over roles and pairs.

A tournament is played in *rounds*. A round is one table of ``n`` seats (the
game's seats) and one *layout*, i.e. the reset options that fix which seat has
which role (SpyRL: ``{spy: k}``; a game whose roles follow the seat names needs
none). Within a round the table's players rotate through the seats: in the
round's game ``r`` (``r = 0..n-1``) seat ``s`` is held by ``group[(s + r) % n]``.
So every member of the group sits in every seat exactly once per round, and
therefore plays every role the layout gives exactly as often as every other
member (in SpyRL: each player is the spy once per round, a civilian n-1 times).

Choosing the group of a round (seeded, ``numpy`` generator):

* ``N <= n`` players: everyone is at the table, the list rotated by one per
  round; when ``N`` does not divide ``n`` some players hold two seats (a team
  with itself), and the rotation spreads the extra seats evenly over rounds.
* ``N > n``: greedy, least-seen first: start from the player with the fewest
  rounds so far, then repeatedly add the player with the fewest meetings with
  those already chosen (then fewest rounds; remaining ties broken by the
  generator), and shuffle the seat order. Every pair then meets about equally
  often; with ``N = n + 1`` and ``N`` rounds each player sits out exactly once
  and each pair meets in exactly ``N - 2`` rounds.

Layouts are cycled round by round. The schedule depends only on (players,
seats, rounds, layouts, seed) and is printed and stored with the results, so
a tournament can be resumed or replayed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Table:
    """One game of the schedule: its position, round, layout options and seat -> player."""

    index: int
    round: int
    options: Mapping[str, Any] = field(default_factory=dict)
    seating: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "round": self.round, "options": dict(self.options), "seating": dict(self.seating)}


def _pick_group(players: Sequence[str], n: int, seen: Counter, met: Counter, rng: np.random.Generator) -> list[str]:
    pool = list(players)
    tiebreak = {p: float(rng.random()) for p in pool}
    first = min(pool, key=lambda p: (seen[p], tiebreak[p]))
    group = [first]
    while len(group) < n:
        rest = [p for p in pool if p not in group]
        group.append(min(rest, key=lambda p: (sum(met[frozenset((p, q))] for q in group), seen[p], tiebreak[p])))
    return [group[k] for k in rng.permutation(len(group))]


def schedule(
    players: Sequence[str],
    seats: Sequence[str],
    rounds: int,
    seed: int = 0,
    layouts: Sequence[Mapping[str, Any]] = ({},),
) -> list[Table]:
    """``rounds`` rounds of ``len(seats)`` games each (see the module docstring)."""
    players, seats = list(players), list(seats)
    if len(set(players)) != len(players):
        raise ValueError(f"players must be distinct (got {players})")
    if len(players) < 2:
        raise ValueError("a tournament needs at least 2 players")
    layouts = list(layouts) or [{}]
    n = len(seats)
    rng = np.random.default_rng(seed)
    seen: Counter = Counter()
    met: Counter = Counter()
    tables: list[Table] = []
    for t in range(rounds):
        if len(players) <= n:
            group = [players[(k + t) % len(players)] for k in range(n)]
        else:
            group = _pick_group(players, n, seen, met, rng)
        for p in set(group):
            seen[p] += 1
        for a, b in combinations(sorted(set(group)), 2):
            met[frozenset((a, b))] += 1
        layout = dict(layouts[t % len(layouts)])
        for r in range(n):
            seating = {seat: group[(s + r) % n] for s, seat in enumerate(seats)}
            tables.append(Table(index=len(tables), round=t, options=layout, seating=seating))
    return tables


def balance(tables: Sequence[Table], roles: Mapping[int, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Counts to check a schedule: games per player, games per pair, and (given each table's
    seat -> role) seats per (player, role)."""
    games: Counter = Counter()
    pairs: Counter = Counter()
    by_role: Counter = Counter()
    for table in tables:
        present = sorted(set(table.seating.values()))
        games.update(present)
        pairs.update(combinations(present, 2))
        if roles is not None:
            for seat, player in table.seating.items():
                by_role[(player, roles[table.index][seat])] += 1
    return {"games": dict(games), "pairs": dict(pairs), "roles": dict(by_role)}
