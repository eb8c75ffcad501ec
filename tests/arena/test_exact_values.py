"""Exact head-to-head values (arena/games/openspiel/exact.py, issue #34) against OpenSpiel's own expected
values and against a Kuhn poker enumeration written out by hand (fast: no model, in ``make mutation``)."""

from __future__ import annotations

import itertools

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import expected_game_score

from arena.games.openspiel import OpenSpielConfig
from arena.games.openspiel.exact import expected_results, expected_returns, head_to_head, tabular_policy
from tolerance import approx64, close64, within

KUHN = pyspiel.load_game("kuhn_poker")
# Two hand-built Kuhn policies: the probability of Bet at each information state (card, betting so far).
CAUTIOUS = {"0": 0.0, "0p": 0.1, "0b": 0.0, "0pb": 0.0, "1": 0.2, "1p": 0.3, "1b": 0.4, "1pb": 0.5,
            "2": 0.6, "2p": 1.0, "2b": 1.0, "2pb": 1.0}
BLUFFER = {"0": 0.7, "0p": 0.8, "0b": 0.1, "0pb": 0.2, "1": 0.5, "1p": 0.5, "1b": 0.6, "1pb": 0.3,
           "2": 0.9, "2p": 0.9, "2b": 1.0, "2pb": 1.0}


def table(bets: dict[str, float]) -> os_policy.TabularPolicy:
    t = os_policy.TabularPolicy(KUHN)
    for row, state in enumerate(t.states):
        b = bets[state.information_state_string()]
        t.action_probability_array[row] = [1 - b, b]
    return t


def by_hand(first: dict[str, float], second: dict[str, float]) -> tuple[float, float]:
    """Player 0's expected return and its probability of winning the hand, ``first`` as player 0 and
    ``second`` as player 1, summed over the 6 deals and the 5 betting sequences (no OpenSpiel)."""
    value, win = 0.0, 0.0
    for c0, c1 in itertools.permutations(range(3), 2):
        high = 1.0 if c0 > c1 else -1.0
        b0, b1p, b1b, b0pb = first[f"{c0}"], second[f"{c1}p"], second[f"{c1}b"], first[f"{c0}pb"]
        lines = [((1 - b0) * (1 - b1p), high * 1),           # pass pass: showdown for 1
                 ((1 - b0) * b1p * (1 - b0pb), -1.0),        # pass bet pass: player 0 folds
                 ((1 - b0) * b1p * b0pb, high * 2),          # pass bet bet: showdown for 2
                 (b0 * (1 - b1b), 1.0),                       # bet pass: player 1 folds
                 (b0 * b1b, high * 2)]                        # bet bet: showdown for 2
        value += sum(p * v for p, v in lines) / 6
        win += sum(p for p, v in lines if v > 0) / 6
    return value, win


def test_expected_returns_are_openspiels_and_the_hand_enumeration() -> None:
    a, b = table(CAUTIOUS), table(BLUFFER)
    for first, second, tf, ts in ((CAUTIOUS, BLUFFER, a, b), (BLUFFER, CAUTIOUS, b, a), (CAUTIOUS, CAUTIOUS, a, a)):
        got = expected_returns(KUHN, [tf, ts])
        reference = expected_game_score.policy_value(KUHN.new_initial_state(), [tf, ts])
        assert got == approx64(list(reference))
        assert got[0] == approx64(by_hand(first, second)[0]) and got[1] == pytest.approx(-got[0])


def test_expected_results_are_win_probabilities_by_hand() -> None:
    r = expected_results(KUHN, [table(CAUTIOUS), table(BLUFFER)])
    value, win = by_hand(CAUTIOUS, BLUFFER)
    assert r[0, 1] == approx64(win) and r[1, 0] == approx64(1 - win)  # no ties in Kuhn
    assert r[0, 0] == r[1, 1] == pytest.approx(0.5)  # against itself: a tie


def test_head_to_head_averages_the_two_seats() -> None:
    returns, results = head_to_head(KUHN, [table(CAUTIOUS), table(BLUFFER), table(CAUTIOUS)])
    v01, w01 = by_hand(CAUTIOUS, BLUFFER)  # cautious as player 0
    v10, w10 = by_hand(BLUFFER, CAUTIOUS)  # cautious as player 1: minus the bluffer's
    assert returns[0, 1] == approx64((v01 - v10) / 2)
    assert returns[1, 0] == approx64(-returns[0, 1])
    assert results[0, 1] == approx64((w01 + (1 - w10)) / 2)
    assert results[0, 1] + results[1, 0] == pytest.approx(1.0)
    vs, _ = by_hand(CAUTIOUS, CAUTIOUS)
    assert returns[0, 0] == approx64((vs - vs) / 2) and np.isnan(results[0, 0])
    assert returns[0, 2] == approx64(0.0) and results[0, 2] == pytest.approx(0.5)  # the same policy
    assert returns[1, 2] == pytest.approx(returns[1, 0])


def test_kuhn_game_value_from_the_cfr_policy() -> None:
    """OpenSpiel's CFR+ average policy is near Nash: player 0's value is near -1/18 in self-play."""
    from arena.games.openspiel.exact import cfr_policy

    cfr = cfr_policy("kuhn_poker()")
    assert expected_returns(KUHN, [cfr, cfr])[0] == within(-1 / 18, 1e-3, "CFR+ stopped early")


def test_the_arena_path_gives_the_hand_built_table() -> None:
    """The policies as the arena asks them (a query per information state) are the hand-built tables."""
    arena_table = tabular_policy(OpenSpielConfig(), lambda qs: [[1 - BLUFFER[q.observation.info_state],
                                                                 BLUFFER[q.observation.info_state]] for q in qs])
    assert expected_returns(KUHN, [arena_table, table(CAUTIOUS)]) == pytest.approx(by_hand(BLUFFER, CAUTIOUS)[0:1] +
                                                                                 (-by_hand(BLUFFER, CAUTIOUS)[0],))


# ------------------------------------------------------------------ the average policy
def average_by_hand(policies: list[dict[str, float]], weights: list[float]) -> dict[str, float]:
    """Kuhn's average Bet probability per information state, written out: player 0 reaches 'c' always and
    'cpb' by passing with c (own reach 1 - bet(c)); player 1 reaches 'cp' and 'cb' with no move of its own."""
    w = [x / sum(weights) for x in weights]
    out = {}
    for c in "012":
        for hist in ("", "p", "b"):
            out[c + hist] = sum(wk * pk[c + hist] for wk, pk in zip(w, policies))
        reach = [wk * (1 - pk[c]) for wk, pk in zip(w, policies)]
        out[c + "pb"] = sum(r * pk[c + "pb"] for r, pk in zip(reach, policies)) / sum(reach)
    return out


def test_average_policy_is_the_reach_weighted_average_by_hand() -> None:
    from open_spiel.python.algorithms import exploitability

    from arena.games.openspiel.exact import average_exploitability, average_policy, own_reach

    assert own_reach(KUHN, table(CAUTIOUS))[table(CAUTIOUS).state_lookup["2pb"]] == pytest.approx(1 - CAUTIOUS["2"])
    for weights in ([1.0, 1.0], [3.0, 1.0]):
        avg = average_policy(KUHN, [table(CAUTIOUS), table(BLUFFER)], weights)
        expected = table(average_by_hand([CAUTIOUS, BLUFFER], weights))
        close64(avg.action_probability_array, expected.action_probability_array)
        got = average_exploitability(OpenSpielConfig(), [
            lambda qs, bets=bets: [[1 - bets[q.observation.info_state], bets[q.observation.info_state]] for q in qs]
            for bets in (CAUTIOUS, BLUFFER)], weights)
        assert got["nash_conv"] == approx64(exploitability.nash_conv(KUHN, expected))
        assert got["exploitability"] == pytest.approx(got["nash_conv"] / 2)
    plain = {k: (CAUTIOUS[k] + BLUFFER[k]) / 2 for k in CAUTIOUS}  # not the average: pb rows differ
    assert average_by_hand([CAUTIOUS, BLUFFER], [1, 1])["0pb"] != pytest.approx(plain["0pb"])


def test_the_average_plays_like_drawing_one_policy_before_the_game() -> None:
    """Against a fixed opponent, in either seat, the average's expected return is the weighted mean of
    the policies' returns (what fictitious play's average stands for)."""
    from arena.games.openspiel.exact import average_policy

    members, weights = [table(CAUTIOUS), table(BLUFFER), table({k: 0.5 for k in CAUTIOUS})], [0.5, 0.3, 0.2]
    avg = average_policy(KUHN, members, weights)
    opponent = table({k: (v + 0.2) / 1.4 for k, v in BLUFFER.items()})
    for seat in (0, 1):
        def value(pi):
            return expected_returns(KUHN, [pi, opponent] if seat == 0 else [opponent, pi])[seat]
        assert value(avg) == approx64(sum(w * value(m) for w, m in zip(weights, members)))


def test_average_weights_are_checked_and_an_unreached_state_takes_the_plain_mean() -> None:
    from arena.games.openspiel.exact import average_policy

    with pytest.raises(ValueError, match="weights must be 2 non-negative numbers"):
        average_policy(KUHN, [table(CAUTIOUS), table(BLUFFER)], [1.0, -1.0])
    with pytest.raises(ValueError, match="weights must be 2"):
        average_policy(KUHN, [table(CAUTIOUS), table(BLUFFER)], [0.0, 0.0])
    always = {k: 1.0 for k in CAUTIOUS}  # bets first: never reaches 'cpb'
    avg = average_policy(KUHN, [table(always), table(always | {"0pb": 0.0})], [1.0, 1.0])
    assert avg.action_probability_array[avg.state_lookup["0pb"]] == pytest.approx([0.5, 0.5])


# ------------------------------------------------------------------ the table, the size check, the values
def test_the_table_asks_each_seat_its_prompt_and_leaves_illegal_actions_at_zero() -> None:
    from arena.games.openspiel.env import observe, render
    from arena.games.openspiel.exact import tabular_policy

    asked = []

    def answer(queries):
        asked.extend(queries)
        return [[1.0 / len(q.actions)] * len(q.actions) for q in queries]

    config = OpenSpielConfig(game="leduc_poker")
    t = tabular_policy(config, answer)
    assert len(asked) == len(t.states) == 936
    for q, state in zip(asked, t.states, strict=True):
        p = state.current_player()
        obs = observe("leduc_poker", state, p)
        assert (q.seat, q.actions, q.messages, q.observation) == (f"player_{p}", obs.legal, render(obs), obs)
        row = t.action_probability_array[t.state_lookup[state.information_state_string()]]
        assert row[list(obs.legal_ids)] == pytest.approx([1 / len(obs.legal_ids)] * len(obs.legal_ids))
        assert row.sum() == pytest.approx(1.0)  # nothing on the illegal actions (Fold where there is no bet)
    assert any(len(q.actions) == 2 for q in asked)


@pytest.mark.parametrize("bad", [[0.5], [0.5, 0.6], [1.2, -0.2], [float("nan"), 1.0], [0.5, 0.5 + 2e-6], "ragged"])
def test_bad_answers_are_one_line_value_errors(bad) -> None:
    from arena.games.openspiel.exact import tabular_policy

    with pytest.raises(ValueError) as e:
        tabular_policy(OpenSpielConfig(), lambda qs: [[0.5, 0.5] for _ in qs[:-1]] if bad == "ragged" else [bad for _ in qs])
    assert "\n" not in str(e.value)
    if bad != "ragged":
        assert f"must be 2 numbers summing to 1, got {bad!r}" in str(e.value)
    assert tabular_policy(OpenSpielConfig(), lambda qs: [[0.5, 0.5 + 5e-7] for _ in qs]) is not None  # within 1e-6


def test_the_size_check_counts_information_states_and_stops_past_the_limit() -> None:
    from arena.games.openspiel.exact import TooLarge, count_info_states

    assert count_info_states(KUHN, 12) == 12
    assert count_info_states(pyspiel.load_game("leduc_poker"), 936) == 936
    with pytest.raises(TooLarge) as e:
        count_info_states(KUHN, 11)
    assert str(e.value) == ("kuhn_poker() has more than 11 information states (or 550 histories) to enumerate; exact "
                            "exploitability is for small games such as kuhn_poker and leduc_poker (raise "
                            "game.exploitability_max_states to try anyway)")


def test_exploitability_only_for_two_player_zero_sum_and_the_reference_points() -> None:
    from open_spiel.python.algorithms import exploitability

    from arena.games.openspiel.exact import exploitability_of, policy_exploitability

    three = pyspiel.load_game("kuhn_poker", {"players": 3})
    uniform = os_policy.UniformRandomPolicy(three)
    assert exploitability_of(three, uniform) == {"nash_conv": pytest.approx(exploitability.nash_conv(three, uniform))}
    values = policy_exploitability(OpenSpielConfig(), lambda qs: [[0.5, 0.5] for _ in qs])
    assert values["exploitability"] == values["exploitability_uniform"] == approx64(11 / 24)
    assert values["nash_conv"] == values["nash_conv_uniform"] == approx64(11 / 12)
    assert 0 <= values["exploitability_cfr"] < 1e-3 and values["nash_conv_cfr"] == pytest.approx(2 * values["exploitability_cfr"])
    assert sorted(values) == ["exploitability", "exploitability_cfr", "exploitability_played", "exploitability_uniform",
                              "invalid_rate_played", "legal_mass_mean", "legal_mass_min", "nash_conv", "nash_conv_cfr",
                              "nash_conv_played", "nash_conv_uniform"]
    # probabilities alone (no reply log-probabilities): all the mass is on legal replies, played = scored
    assert values["exploitability_played"] == values["exploitability"] and values["invalid_rate_played"] == 0.0
    assert values["legal_mass_mean"] == values["legal_mass_min"] == 1.0


def test_own_reach_is_the_product_of_the_players_own_moves_in_three_player_kuhn() -> None:
    from arena.games.openspiel.exact import own_reach

    game = pyspiel.load_game("kuhn_poker", {"players": 3})
    t = os_policy.TabularPolicy(game)
    rng = np.random.default_rng(0)
    t.action_probability_array = rng.dirichlet([1.0, 1.0], size=len(t.states))
    x = own_reach(game, t)
    for row, state in enumerate(t.states):
        p, replay, expected = state.current_player(), game.new_initial_state(), 1.0
        for action in state.history():
            if not replay.is_chance_node() and replay.current_player() == p:
                expected *= t.action_probability_array[t.state_lookup[replay.information_state_string()], action]
            replay.apply_action(action)
        assert x[row] == approx64(expected), state.information_state_string()


def test_average_weights_default_to_equal_and_a_zero_weight_drops_a_policy() -> None:
    from arena.games.openspiel.exact import average_policy

    members = [table(CAUTIOUS), table(BLUFFER)]
    close64(average_policy(KUHN, members).action_probability_array, average_policy(KUHN, members, [2, 2]).action_probability_array)
    close64(average_policy(KUHN, members, [1, 0]).action_probability_array, members[0].action_probability_array)
    for bad in ([1.0], [1.0, float("nan")], [1.0, float("inf")]):
        with pytest.raises(ValueError, match="weights must be 2 non-negative numbers"):
            average_policy(KUHN, members, bad)
