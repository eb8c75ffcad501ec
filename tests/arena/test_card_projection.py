"""bench/card_dependence.py's card-blind projection on a policy that uses its card (#53): each state's
probabilities become the plain mean over its card group, checked against values by hand.

tests/arena/test_card_dependence.py projects card-blind policies only, where any row of a group is its mean, so
a projection that took each group's first row passed it; CFR+'s projection, >= 1/3 for any card-blind Kuhn
policy, did not tell them apart either (0.50 projected by the mean, 0.77 by the first row).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyspiel
from open_spiel.python.algorithms import cfr

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("card_dependence", ROOT / "bench/card_dependence.py")
card_dependence = importlib.util.module_from_spec(spec)
spec.loader.exec_module(card_dependence)

# Kuhn's first decision, by card (0 jack, 1 queen, 2 king): bet 1/4, 1/2, 3/4 of the time (dyadic: exact means).
OPENING = [("0", {"Pass": 0.75, "Bet": 0.25}), ("1", {"Pass": 0.5, "Bet": 0.5}), ("2", {"Pass": 0.25, "Bet": 0.75})]
# Facing a bet, by card, listed king first: the group's first row is not its mean.
FACING = [("2pb", {"Pass": 0.0, "Bet": 1.0}), ("0pb", {"Pass": 1.0, "Bet": 0.0}), ("1pb", {"Pass": 0.5, "Bet": 0.5})]


def test_the_projection_is_the_mean_over_each_card_group() -> None:
    rows = OPENING + FACING
    projected = card_dependence.blind_projection(rows, "kuhn_poker")
    assert [s for s, _ in projected] == [s for s, _ in rows]  # every row kept, in order
    assert [p for _, p in projected] == [{"Pass": 0.5, "Bet": 0.5}] * 6
    assert card_dependence.spread(rows, "kuhn_poker") == (0.75, 1.0)  # gaps 1/2 and 1; both argmaxes differ


def test_leduc_groups_mean_over_the_private_card_only() -> None:
    state = "[Observer: 0][Private: {}][Round 1][Player: 0][Pot: 2][Money: 99 99][Round1: ]"
    rows = [(state.format(c), {"Call": c / 4, "Raise": 1 - c / 4}) for c in (0, 1, 2, 3, 4, 5)]
    other = [("[Observer: 1][Private: 3][Round 1][Player: 1][Pot: 2][Money: 99 99][Round1: 1]", {"Call": 1.0})]
    projected = dict(card_dependence.blind_projection(rows + other, "leduc_poker"))
    assert projected[state.format(0)] == projected[state.format(5)] == {"Call": 0.625, "Raise": 0.375}
    assert projected[other[0][0]] == {"Call": 1.0}


def test_cfr_plus_projected_is_card_blind_but_far_better_than_its_first_rows() -> None:
    """CFR+ on Kuhn: its projection's exploitability is 0.50 (the first row of each group: 0.77)."""
    game = pyspiel.load_game("kuhn_poker")
    solver = cfr.CFRPlusSolver(game)
    for _ in range(200):
        solver.evaluate_and_update_policy()
    table = solver.average_policy()
    rows = []
    for state in table.states:
        player = state.current_player()
        probs = table.action_probabilities(state)
        rows.append((state.information_state_string(player), {state.action_to_string(player, a): p
                                                             for a, p in probs.items()}))
    blind = card_dependence.exploitability_of_rows("kuhn_poker", card_dependence.blind_projection(rows, "kuhn_poker"))
    assert 1 / 3 <= blind < 0.6
