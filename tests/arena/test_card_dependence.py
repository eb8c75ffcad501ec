"""bench/card_dependence.py: a policy's card-blind projection, on hand-built tabular policies (fast: no model)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyspiel
import pytest
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import cfr

from arena.games.openspiel import OpenSpielGame
from arena.games.openspiel.types import OpenSpielConfig
from arena.rank.exploitability import played_rows
from tolerance import within

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("card_dependence", ROOT / "bench/card_dependence.py")
card_dependence = importlib.util.module_from_spec(spec)
spec.loader.exec_module(card_dependence)


def rows_of(game_name: str, table: os_policy.TabularPolicy) -> list[tuple[str, dict[str, float]]]:
    """The rows ``arena.eval exploitability`` hands the script (``played_rows``) for a tabular policy."""
    return played_rows(OpenSpielGame(OpenSpielConfig(game=game_name)), table.action_probability_array)


def nash(game_name: str, iterations: int) -> list[tuple[str, dict[str, float]]]:
    game = pyspiel.load_game(game_name)
    solver = cfr.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return rows_of(game_name, solver.average_policy())


def test_card_groups_drop_only_the_private_card() -> None:
    assert card_dependence.card_group("kuhn_poker", "2pb") == card_dependence.card_group("kuhn_poker", "0pb") == "pb"
    leduc = "[Observer: 1][Private: 4][Round 2][Player: 1][Pot: 6][Money: 97 97][Public: 2][Round1: 1 1][Round2: 2]"
    assert card_dependence.card_group("leduc_poker", leduc) == (
        "[Observer: 1][Round 2][Player: 1][Pot: 6][Money: 97 97][Public: 2][Round1: 1 1][Round2: 2]")


@pytest.mark.parametrize("game_name, groups", [("kuhn_poker", 4), ("leduc_poker", 936 // 6 * 2)])
def test_a_card_blind_policy_is_its_own_projection(game_name: str, groups: int) -> None:
    """Always call (Leduc: 1.4667) or a mixed card-blind Kuhn policy: the projection changes nothing, spread 0."""
    game = pyspiel.load_game(game_name)
    table = os_policy.TabularPolicy(game)
    rows = rows_of(game_name, table)  # uniform: card-blind
    if game_name == "leduc_poker":
        rows = [(s, {a: float(a == "Call") for a in p}) for s, p in rows]
    else:
        rows = [(s, {"Pass": 0.25 * len(s), "Bet": 1 - 0.25 * len(s)}) for s, p in rows]  # by the betting only
    assert len({card_dependence.card_group(game_name, s) for s, _ in rows}) <= groups
    assert card_dependence.blind_projection(rows, game_name) == rows
    assert card_dependence.spread(rows, game_name) == (0.0, 0.0)
    own = card_dependence.exploitability_of_rows(game_name, rows)
    assert own == card_dependence.exploitability_of_rows(game_name, card_dependence.blind_projection(rows, game_name))
    if game_name == "leduc_poker":
        assert own == within(1.4667, 1e-4, "written to 4 decimals")
    else:
        assert own >= 1 / 3 - 1e-9


def test_nash_uses_its_card_and_its_projection_is_on_the_floor() -> None:
    """CFR+ on Kuhn: near 0, its most likely action differs between cards, its projection >= the card-blind 1/3."""
    rows = nash("kuhn_poker", 200)
    own = card_dependence.exploitability_of_rows("kuhn_poker", rows)
    blind = card_dependence.exploitability_of_rows("kuhn_poker", card_dependence.blind_projection(rows, "kuhn_poker"))
    gap, differ = card_dependence.spread(rows, "kuhn_poker")
    assert own < 0.01 and blind >= 1 / 3 - 1e-9
    assert gap > 0.5 and differ > 0.5
