"""Exact best responses (arena/games/openspiel/exact.py ``best_response_table``) and the ``br:<bot>`` scripted
bot (arena/games/openspiel/bots.py), issue #34: against OpenSpiel's best response, against every pure
strategy of Kuhn poker, and a one-line exit 2 on a game too large to enumerate (fast: no model)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import exploitability
from open_spiel.python.algorithms.best_response import BestResponsePolicy

from arena.core.errors import ConfigError
from arena.games.openspiel import OpenSpielGame
from arena.games.openspiel.bots import BOTS
from arena.games.openspiel.env import observe
from arena.games.openspiel.exact import best_response_table, expected_returns
from tolerance import approx64

ROOT = Path(__file__).resolve().parents[2]
KUHN = pyspiel.load_game("kuhn_poker")
HAND = {"0": 0.2, "0p": 0.3, "0b": 0.1, "0pb": 0.0, "1": 0.4, "1p": 0.5, "1b": 0.45, "1pb": 0.6,
        "2": 0.8, "2p": 0.9, "2b": 1.0, "2pb": 1.0}  # Bet probability per information state


def hand_table() -> os_policy.TabularPolicy:
    t = os_policy.TabularPolicy(KUHN)
    for row, state in enumerate(t.states):
        t.action_probability_array[row] = [1 - HAND[state.information_state_string()], HAND[state.information_state_string()]]
    return t


def pure(player: int, bits: tuple[int, ...]) -> os_policy.TabularPolicy:
    """The pure strategy of ``player`` that bets at its k-th information state when bits[k] (sorted keys)."""
    t = os_policy.TabularPolicy(KUHN)
    keys = sorted(k for k, s in zip(t.state_lookup, t.states) if s.current_player() == player)
    for key, bet in zip(keys, bits, strict=True):
        t.action_probability_array[t.state_lookup[key]] = [1 - bet, bet]
    return t


def test_best_response_is_openspiels_and_beats_every_pure_strategy() -> None:
    policy = hand_table()
    br = best_response_table(KUHN, policy)
    for row, state in enumerate(br.states):
        p = state.current_player()
        best = BestResponsePolicy(KUHN, p, policy).best_response_action(state.information_state_string())
        assert list(br.action_probability_array[row]) == [float(a == best) for a in range(2)]
    for p in (0, 1):
        def value(pi):
            return expected_returns(KUHN, [pi, policy] if p == 0 else [policy, pi])[p]
        reference = exploitability.best_response(KUHN, policy, p)["best_response_value"]
        assert value(br) == approx64(reference)
        best_pure = max(value(pure(p, bits)) for bits in itertools.product((0, 1), repeat=6))  # all 64
        assert value(br) == approx64(best_pure)
    assert value(br) > value(policy) + 0.05  # it does exploit the hand-built policy


def test_the_br_bot_plays_the_best_response_to_another_bot() -> None:
    bot = BOTS["br"].with_arg("random")
    br = best_response_table(KUHN, os_policy.UniformRandomPolicy(KUHN))
    for row, state in enumerate(br.states):
        obs = observe("kuhn_poker", state, state.current_player())
        assert bot.action_probs(obs) == list(br.action_probability_array[row, list(obs.legal_ids)])
    env = OpenSpielGame()
    env.reset(seed=0)
    obs = env.observe(env.agent_selection)
    rng = np.random.default_rng(0)
    best = obs.legal[int(np.argmax(bot.action_probs(obs)))]
    assert {bot(obs, rng) for _ in range(20)} == {best}  # deterministic
    assert BOTS["br"].target == "cfr"


def test_br_against_an_unknown_bot_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"br:nope: a best response is to one of this game's bots: br:cfr, br:current, br:random$"):
        BOTS["br"].with_arg("nope")


def test_a_game_too_large_to_enumerate_is_one_config_error_line() -> None:
    env = OpenSpielGame(game="tic_tac_toe")
    env.reset(seed=0)
    with pytest.raises(ConfigError) as e:
        BOTS["br"].with_arg("random").action_probs(env.observe(env.agent_selection))
    assert "scripted:br:random: tic_tac_toe() has more than 20000 information states" in str(e.value)
    assert "\n" not in str(e.value)


def test_the_cli_exits_2_with_one_line_on_a_game_too_large() -> None:
    out = subprocess.run([sys.executable, "-m", "arena.play", "arena/games/openspiel/kuhn.yaml", "--set",
                          "game.game=tic_tac_toe", "--set", "seats={'*': 'scripted:br:random'}", "--set",
                          "runner.progress=false", "--episodes", "1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env=os.environ | {"OMP_NUM_THREADS": "1"})
    lines = out.stderr.strip().splitlines()  # arena.play announces its games on stderr first
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert [line for line in lines if line.startswith("error:")] == lines[-1:]
    assert lines[-1].startswith("error: arena/games/openspiel/kuhn.yaml: seats.*: scripted:br:random: tic_tac_toe() "
                                "has more than 20000 information states")  # at start-up: the config check
