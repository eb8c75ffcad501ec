"""The policy actually played in free generation (issue #34): arena/games/openspiel/exact.py
``played_policy`` and the ``*_played`` / ``legal_mass_*`` / ``invalid_rate_played`` values of
``policy_metrics``, against direct tabular computations with OpenSpiel and against the env itself.

The policies are hand-built reply log-probabilities ``l_i`` per information state (a reply is exactly
the text ``a_i`` with probability ``exp(l_i)``, anything else with ``1 - sum exp(l)``), handed in the way
arena/loop/exact.py ``SeatActionProbs`` hands a model's. Fast: no model.
"""

from __future__ import annotations

import math

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import exploitability

from arena.games.openspiel import OpenSpielConfig, OpenSpielGame
from arena.games.openspiel.exact import exploitability_of, played_policy, policy_exploitability, policy_tables
from arena.policies.base import SamplingParams
from tolerance import approx64, within

KUHN = pyspiel.load_game("kuhn_poker")
LN = math.log
# (reply Pass, reply Bet) probabilities per information state: some put all their mass on the two texts,
# some almost none (the base model's case: the played policy is then nearly uniform).
KUHN_REPLIES = {"0": (0.05, 0.01), "0p": (0.7, 0.3), "0b": (0.2, 0.0), "0pb": (0.5, 0.1),
                "1": (0.001, 0.002), "1p": (0.3, 0.3), "1b": (0.1, 0.5), "1pb": (0.25, 0.25),
                "2": (0.02, 0.9), "2p": (0.1, 0.6), "2b": (1e-6, 2e-6), "2pb": (0.05, 0.85)}


class HandBuilt:
    """Reply log-probabilities by OpenSpiel information state, as ``SeatActionProbs`` gives a model's."""

    def __init__(self, replies: dict[str, tuple[float, ...]]):
        self.replies = replies

    def reply_logprobs(self, queries):
        return [[LN(r) if r > 0 else -math.inf for r in self.replies[q.observation.info_state]] for q in queries]

    def __call__(self, queries):
        rows = [np.exp(l) for l in self.reply_logprobs(queries)]
        return [list(r / r.sum()) for r in rows]


def direct_table(game, replies, played: bool) -> os_policy.TabularPolicy:
    """The tabular policy computed by hand: ``exp(l) + (1 - m) / k`` (played) or ``exp(l) / m`` (exact)."""
    table = os_policy.TabularPolicy(game)
    for row, state in enumerate(table.states):
        r = np.asarray(replies[state.information_state_string()], dtype=float)
        legal = state.legal_actions()
        table.action_probability_array[row] = 0.0
        table.action_probability_array[row, legal] = r + (1 - r.sum()) / len(legal) if played else r / r.sum()
    return table


def leduc_replies(seed: int = 0) -> dict[str, tuple[float, ...]]:
    """Random reply probabilities at every Leduc information state: mass ``m ~ U(0, 1)`` split at random."""
    game = pyspiel.load_game("leduc_poker")
    table = os_policy.TabularPolicy(game)
    rng = np.random.default_rng(seed)
    out = {}
    for key, state in sorted(zip(table.state_lookup, table.states, strict=True)):
        k = len(state.legal_actions())
        out[key] = tuple(float(x) for x in rng.uniform() * rng.dirichlet(np.ones(k)))
    return out


def test_played_policy_is_the_reply_mass_plus_the_invalid_share_on_the_uniform_fallback() -> None:
    p, m = played_policy([LN(0.1), LN(0.3), LN(0.2)])
    assert m == pytest.approx(0.6)
    assert list(p) == approx64([0.1 + 0.4 / 3, 0.3 + 0.4 / 3, 0.2 + 0.4 / 3])
    p, m = played_policy([-math.inf, 0.0])  # a bot that never bets: all its mass on Pass... on the 2nd text
    assert (list(p), m) == ([0.0, 1.0], 1.0)
    p, m = played_policy([-2000.0, -2000.0])  # underflow: no mass on any legal text, the fallback plays
    assert (list(p), m) == ([0.5, 0.5], 0.0)
    with pytest.raises(ValueError, match=r"reply probabilities exp\(l\) must sum to at most 1, got 1.5"):
        played_policy([LN(0.9), LN(0.6)])


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker"])
def test_played_and_exact_exploitability_are_openspiels_on_hand_built_tables(game: str) -> None:
    replies = KUHN_REPLIES if game == "kuhn_poker" else leduc_replies()
    os_game = pyspiel.load_game(game)
    if game == "kuhn_poker":
        values = policy_exploitability(OpenSpielConfig(game=game), HandBuilt(replies))
    else:  # the same values without the CFR+ reference point (seconds on Leduc)
        tables = policy_tables(OpenSpielConfig(game=game), HandBuilt(replies))
        mass = tables["legal_mass"]
        values = {**exploitability_of(os_game, tables["exact"]), "legal_mass_mean": mass.mean(),
                  "legal_mass_min": mass.min(), **{f"{k}_played": v for k, v in
                                                    exploitability_of(os_game, tables["played"]).items()}}
    exact = exploitability.exploitability(os_game, direct_table(os_game, replies, played=False))
    played = exploitability.exploitability(os_game, direct_table(os_game, replies, played=True))
    assert values["exploitability"] == approx64(exact)
    assert values["exploitability_played"] == approx64(played)
    assert values["nash_conv_played"] == approx64(2 * played)
    assert abs(played - exact) > 0.05  # the two policies differ enough that mixing them up fails
    masses = [sum(r) for r in replies.values()]
    assert values["legal_mass_mean"] == approx64(np.mean(masses))
    assert values["legal_mass_min"] == approx64(min(masses))


def _invalid_rate_by_branching(game, replies) -> float:
    """``E[invalid moves / moves]`` by expanding each move into its two causes: the reply ``a_i`` itself
    (probability ``exp(l_i)``), or an invalid reply (``1 - m``) after which the fallback picks ``a_j`` (1/k)."""

    def walk(state, reach: float, invalid: int, moves: int) -> float:
        if state.is_terminal():
            return reach * invalid / max(1, moves)
        if state.is_chance_node():
            return sum(walk(state.child(a), reach * p, invalid, moves) for a, p in state.chance_outcomes())
        r = replies[state.information_state_string()]
        legal = state.legal_actions()
        total = 0.0
        for i, a in enumerate(legal):
            total += walk(state.child(a), reach * r[i], invalid, moves + 1)
            total += walk(state.child(a), reach * (1 - sum(r)) / len(legal), invalid + 1, moves + 1)
        return total

    return walk(game.new_initial_state(), 1.0, 0, 0)


def test_invalid_rate_played_is_the_expected_per_game_share_of_invalid_moves() -> None:
    values = policy_exploitability(OpenSpielConfig(), HandBuilt(KUHN_REPLIES))
    assert values["invalid_rate_played"] == approx64(_invalid_rate_by_branching(KUHN, KUHN_REPLIES))
    assert 0.2 < values["invalid_rate_played"] < 0.8


def test_the_env_plays_what_the_played_policy_says() -> None:
    """Replies drawn from the hand-built reply distribution (the exact text, or a reply that names no action)
    go through the real env: its first moves' frequencies and its mean ``invalid_rate`` match the played
    policy within 4 standard errors (so the fallback the formula assumes is the env's)."""
    values = policy_exploitability(OpenSpielConfig(), HandBuilt(KUHN_REPLIES))
    rng = np.random.default_rng(7)
    env = OpenSpielGame()
    bets = {card: [] for card in "012"}
    rates = []
    for seed in range(3000):
        env.reset(seed=seed)
        while not all(env.terminations.values()):
            obs = env.observe(env.agent_selection)
            r = np.asarray(KUHN_REPLIES[obs.info_state])
            k = int(rng.choice(3, p=[*r, 1 - r.sum()]))
            env.step(obs.legal[k] if k < 2 else "I fold my hand")  # Kuhn has no 'fold': no legal name
        bets[env.os_state.information_state_string(0)[0]].append(env.moves[0][1] == "Bet")  # player 0's card
        rates.append(env.episode_metrics()["invalid_rate"])
    for card, seen in bets.items():
        r = KUHN_REPLIES[card]
        p_bet = r[1] + (1 - sum(r)) / 2
        assert abs(np.mean(seen) - p_bet) < 4 * math.sqrt(p_bet * (1 - p_bet) / len(seen)), (card, np.mean(seen), p_bet)
    se = np.std(rates) / math.sqrt(len(rates))
    assert abs(np.mean(rates) - values["invalid_rate_played"]) < 4 * se, (np.mean(rates), values["invalid_rate_played"])


# ------------------------------------------------------------------ the played policy, sampled
# Reply distributions per Kuhn information state over: the exact texts, another spelling the parser
# accepts ("I bet" -> Bet), and a reply naming no action. Only "Pass"/"Bet" count for the exact formula.
SPELLINGS = ("Pass", "Bet", "I bet", "hmm")
SAMPLED = {"0": (0.05, 0.0, 0.6, 0.35), "0p": (0.5, 0.1, 0.3, 0.1), "0b": (0.9, 0.0, 0.0, 0.1),
           "0pb": (0.2, 0.0, 0.0, 0.8), "1": (0.0, 0.0, 0.0, 1.0), "1p": (0.3, 0.3, 0.3, 0.1),
           "1b": (0.1, 0.1, 0.6, 0.2), "1pb": (0.25, 0.25, 0.25, 0.25), "2": (0.0, 0.1, 0.8, 0.1),
           "2p": (0.1, 0.1, 0.7, 0.1), "2b": (0.0, 0.0, 0.9, 0.1), "2pb": (0.05, 0.05, 0.85, 0.05)}


def _true_played() -> float:
    table = os_policy.TabularPolicy(KUHN)
    for row, state in enumerate(table.states):
        pas, bet, i_bet, junk = SAMPLED[state.information_state_string()]
        table.action_probability_array[row] = [pas + junk / 2, bet + i_bet + junk / 2]
    return exploitability.exploitability(KUHN, table)


def test_the_sampled_played_policy_counts_every_spelling_the_parser_accepts() -> None:
    from arena.games.openspiel.exact import sampled_played_exploitability

    rng = np.random.default_rng(3)

    def replies(queries, n):
        return [list(rng.choice(SPELLINGS, size=n, p=SAMPLED[q.observation.info_state])) for q in queries]

    truth = _true_played()
    exact_texts = {k: (max(v[0], 1e-9), max(v[1], 1e-9)) for k, v in SAMPLED.items()}  # what the formula sees
    formula = policy_exploitability(OpenSpielConfig(), HandBuilt(exact_texts))["exploitability_played"]
    assert abs(formula - truth) > 0.1  # "I bet" is common: the exact-text formula is off here
    got = sampled_played_exploitability(OpenSpielConfig(), replies, n=2000, bootstrap=100, seed=0)
    assert got["exploitability_played_sampled_lo"] <= truth <= got["exploitability_played_sampled_hi"], (got, truth)
    assert abs(got["exploitability_played_sampled"] - truth) < 0.03
    assert got["exploitability_played_sampled_hi"] - got["exploitability_played_sampled_lo"] < 0.1
    assert got["invalid_share_sampled"] == within(np.mean([v[3] for v in SAMPLED.values()]), 0.02, "2,000 sampled replies")


def test_sample_replies_asks_each_seats_policy_with_seeded_requests() -> None:
    from arena.games.openspiel.bots import BOTS
    from arena.games.openspiel.exact import info_state_queries
    from arena.loop.exact import policies_action_probs
    from arena.policies.scripted import ScriptedPolicy

    policies = {"br": ScriptedPolicy(BOTS["br"].with_arg("random")), "rnd": ScriptedPolicy(BOTS["random"])}
    probs = policies_action_probs(policies, lambda seat: "br" if seat == "player_0" else "rnd",
                                  lambda *_: SamplingParams(), "move")
    _, queries, _ = info_state_queries(OpenSpielConfig())
    first, again = probs.sample_replies(queries, 40, seed=5), probs.sample_replies(queries, 40, seed=5)
    assert first == again and all(len(r) == 40 for r in first)
    for q, row in zip(queries, first, strict=True):
        if q.seat == "player_0":  # the best response is deterministic
            best = q.actions[int(np.argmax(BOTS["br"].with_arg("random").action_probs(q.observation)))]
            assert set(row) == {best}
        else:
            assert set(row) == set(q.actions)  # uniform: both names in 40 draws (fails with probability 2^-39)


def test_the_cli_prints_the_played_policy_and_its_sampled_estimate(capsys) -> None:
    from arena.core.errors import ConfigError
    from arena.rank.eval import main

    kuhn = "arena/games/openspiel/kuhn.yaml"
    assert main(["exploitability", kuhn, "--set", "seats={'*': 'scripted:random'}", "--set",
                 "policies.learner.trainable=false", "--sample", "30", "--bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    played = next(line for line in out.splitlines() if line.startswith("played (invalid: fallback)"))
    assert float(played.split()[3]) == within(11 / 24, 1e-6, "printed to 6 decimals")
    sampled = next(line for line in out.splitlines() if line.startswith("played, sampled (30 replies per state)"))
    assert "invalid share 0.000" in sampled
    with pytest.raises(ConfigError, match=r"^--sample: must be between 0 and 10000 \(got -1\)$"):
        main(["exploitability", kuhn, "--sample", "-1"])


def test_retry_mode_has_no_closed_form_played_policy() -> None:
    """Under ``invalid.mode: retry`` the retry prompt shows the failed reply: no ``*_played`` values, the
    legal mass still."""
    values = policy_exploitability(OpenSpielConfig(invalid={"mode": "retry"}), HandBuilt(KUHN_REPLIES))
    assert not [k for k in values if k.endswith("_played")]
    assert values["legal_mass_min"] == pytest.approx(3e-6)


def test_in_score_mode_the_played_policy_is_the_scored_one() -> None:
    if "action_mode" not in OpenSpielConfig.model_fields:
        pytest.skip("OpenSpielConfig has no action_mode yet")
    values = policy_exploitability(OpenSpielConfig(action_mode="score"), HandBuilt(KUHN_REPLIES))
    assert values["exploitability_played"] == values["exploitability"] and values["invalid_rate_played"] == 0.0
    assert values["legal_mass_min"] == pytest.approx(3e-6)  # still the model's mass on the texts, for the record
