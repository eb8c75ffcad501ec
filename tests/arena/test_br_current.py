"""``scripted:br:current`` (arena/games/openspiel/bots.py) and the trainer's responder (arena/loop/components/respond.py),
issue #34: the bot plays OpenSpiel's exact best response to the policy it is told to follow, the played policy
in free generation, the exact one in score mode (fast: no model; the trainer's side is tests/test_br_training.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python import policy as os_policy

from arena.core.errors import ConfigError
from arena.games.openspiel import OpenSpielGame
from arena.games.openspiel.bots import BOTS, FOLLOWED
from arena.games.openspiel.env import observe
from arena.games.openspiel.exact import average_metrics, average_policy, best_response_table, played_policy
from tolerance import apart, approx64

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "games/openspiel/kuhn.br.yaml"
BET = {"0": 0.2, "0p": 0.3, "0b": 0.1, "0pb": 0.0, "1": 0.4, "1p": 0.5, "1b": 0.45, "1pb": 0.6,
       "2": 0.8, "2p": 0.9, "2b": 1.0, "2pb": 1.0}  # a hand-built policy: Bet probability per information state
MASS = 0.3  # the legal mass of the "free generation" policy below: 70% of its replies are invalid


def hand(queries):
    return [[1 - BET[q.observation.info_state], BET[q.observation.info_state]] for q in queries]


class Replies:
    """A free-generation policy: reply log-probabilities ``log(MASS * p_i)``, so the played policy is
    ``MASS * p + (1 - MASS) * uniform``."""

    def reply_logprobs(self, queries):
        return [[math.log(MASS * p) if p > 0 else -math.inf for p in row] for row in hand(queries)]

    def __call__(self, queries):
        return hand(queries)


def table(rows_of) -> os_policy.TabularPolicy:
    env = OpenSpielGame()
    t = os_policy.TabularPolicy(env.config.load())
    for row, state in enumerate(t.states):
        t.action_probability_array[row] = rows_of(state.information_state_string())
    return t


def bot_table(bot) -> np.ndarray:
    t = table(lambda key: [0.5, 0.5])
    for row, state in enumerate(t.states):
        obs = observe("kuhn_poker", state, state.current_player())
        t.action_probability_array[row] = bot.action_probs(obs)
    return t.action_probability_array


def test_br_current_is_the_best_response_to_the_policy_it_follows() -> None:
    env, bot = OpenSpielGame(), BOTS["br"].with_arg("current")
    assert bot.follows and not BOTS["br"].follows
    game = env.config.load()
    bot.follow(env, hand)  # probabilities only: the exact policy is the one played
    exact = table(lambda k: [1 - BET[k], BET[k]])
    assert (bot_table(bot) == best_response_table(game, exact).action_probability_array).all()
    bot.follow(env, Replies())  # free generation: the played policy, invalid replies on the uniform fallback
    played = table(lambda k: played_policy([math.log(MASS * p) if p > 0 else -math.inf for p in (1 - BET[k], BET[k])])[0])
    want = best_response_table(game, played).action_probability_array
    assert (bot_table(bot) == want).all()
    assert not (want == best_response_table(game, exact).action_probability_array).all()  # the two differ here
    saved = json.loads(json.dumps(bot.followed()))  # a checkpoint's responders.json, read back
    bot.follow(env, hand)
    bot.restore(saved)
    assert (bot_table(bot) == want).all()


def test_score_mode_and_retry_respond_to_the_exact_policy() -> None:
    """In action_mode: score each move is drawn from the exact policy, and under invalid.mode: retry the played
    policy has no closed form: either way the responder answers the exact policy, not the played one."""
    bot = BOTS["br"].with_arg("current")
    game = OpenSpielGame().config.load()
    exact = best_response_table(game, table(lambda k: [1 - BET[k], BET[k]])).action_probability_array
    for env in (OpenSpielGame(action_mode="score"), OpenSpielGame(invalid={"mode": "retry"})):
        bot.follow(env, Replies())
        assert (bot_table(bot) == exact).all()
    bot.follow(OpenSpielGame(), Replies())
    assert not (bot_table(bot) == exact).all()


def test_br_current_with_no_policy_to_follow_is_one_line() -> None:
    FOLLOWED.clear()
    obs = OpenSpielGame()
    obs.reset(seed=0)
    with pytest.raises(ConfigError, match="scripted:br:current responds to the trainable policy"):
        BOTS["br"].with_arg("current").action_probs(obs.observe(obs.agent_selection))
    out = subprocess.run([sys.executable, "-m", "arena.play", CONFIG, "--set", "seats={'*': 'scripted:br:current'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "scripted:br:current responds" in errors[0] and "Traceback" not in out.stderr


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4))
def test_no_card_blind_kuhn_policy_is_below_one_third(bets: list[float]) -> None:
    """docs/games/nash.md reads 1/3 as the card-blind floor: a Kuhn policy whose Bet probability depends only
    on the betting so far (not on the card) is at least 1/3 from Nash; only a policy that uses its card can
    go lower (CFR+'s is near 0)."""
    from open_spiel.python.algorithms import exploitability

    game = OpenSpielGame().config.load()
    blind = table(lambda k: [1 - bets[["", "p", "b", "pb"].index(k[1:])], bets[["", "p", "b", "pb"].index(k[1:])]])
    assert exploitability.exploitability(game, blind) >= 1 / 3 - 1e-9


def test_average_metrics_is_the_exploitability_of_the_average_policy() -> None:
    """``average_metrics`` (what exact evaluations log as ``*_average``) of played tables: the exact
    exploitability of ``average_policy`` of them, equal weights; of one table, that table's own."""
    from open_spiel.python.algorithms import exploitability

    config = OpenSpielGame().config
    game = config.load()
    a = table(lambda k: [1 - BET[k], BET[k]])
    b = table(lambda k: [0.9, 0.1] if k.startswith("0") else [0.2, 0.8])
    got = average_metrics(config, [a.action_probability_array, b.action_probability_array])
    assert set(got) == {"nash_conv_average", "exploitability_average"}
    want = average_policy(game, [a, b])
    assert got["exploitability_average"] == approx64(exploitability.exploitability(game, want))
    assert got["nash_conv_average"] == approx64(exploitability.nash_conv(game, want))
    assert apart(got["exploitability_average"], exploitability.exploitability(game, a), 1e-3)
    alone = average_metrics(config, [a.action_probability_array])
    assert alone["exploitability_average"] == approx64(exploitability.exploitability(game, a))
