"""OpenSpiel games (games/openspiel): the kit, Hypothesis properties against OpenSpiel itself, exact
exploitability against OpenSpiel's own numbers, the bots, and one-line exits for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyspiel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import exploitability

from arena.core.game import Invalid
from arena.testing import check_game
from arena.games.openspiel import OpenSpielConfig, OpenSpielGame
from arena.games.openspiel.bots import BOTS
from arena.games.openspiel.exact import TooLarge, policy_exploitability, tabular_policy
from arena.games.openspiel.rules import GameLoadError, load_game, parse_action
from tolerance import approx32, approx64, within

ROOT = Path(__file__).resolve().parents[2]
GAMES = ("kuhn_poker", "leduc_poker", "tic_tac_toe", "liars_dice")


@pytest.mark.parametrize("name", GAMES)
def test_kit_passes(name: str) -> None:
    check_game(lambda: OpenSpielGame(game=name), bot=BOTS["random"])


def test_kit_passes_with_params_and_three_players() -> None:
    check_game(lambda: OpenSpielGame(game="kuhn_poker", params={"players": 3}), bot=BOTS["random"])
    assert OpenSpielGame(game="kuhn_poker", params={"players": 3}).possible_agents == ["player_0", "player_1", "player_2"]


# ------------------------------------------------------------------ Hypothesis against OpenSpiel
def _reply(name: str, style: int) -> str:
    return [name, name.upper(), f"I think I will {name.lower()} now", f"pass? no: {name}."][style]


@pytest.mark.parametrize("name", ("kuhn_poker", "leduc_poker", "tic_tac_toe"))
@settings(max_examples=40, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3)), min_size=1, max_size=12),
       seed=st.integers(0, 2**31))
def test_legal_names_and_returns_match_openspiel_at_every_state(name: str, picks: list[tuple[int, int]], seed: int) -> None:
    """At every state the offered names are OpenSpiel's legal actions of the state rebuilt from its history;
    a reply naming one plays exactly it; the seats' totals are OpenSpiel's returns (summing to 0)."""
    env = OpenSpielGame(game=name)
    env.reset(seed=seed)
    k = 0
    while not env.done:
        seat = env.agent_selection
        shadow = env.game.new_initial_state()
        for action in env.os_state.history():
            shadow.apply_action(action)
        player = shadow.current_player()
        assert seat == f"player_{player}"
        obs = env.observe(seat)
        assert obs.legal_ids == tuple(shadow.legal_actions())
        assert obs.legal == tuple(shadow.action_to_string(player, a) for a in shadow.legal_actions())
        choice, style = picks[k % len(picks)]
        chosen = obs.legal_ids[choice % len(obs.legal)]
        env.step(_reply(obs.legal[choice % len(obs.legal)], style))
        assert env.os_state.history()[len(shadow.history())] == chosen
        k += 1
    returns = env.os_state.returns()
    assert env.episode().rewards == {f"player_{p}": pytest.approx(r) for p, r in enumerate(returns)}
    assert sum(env.episode().rewards.values()) == pytest.approx(0.0)
    assert env.infos[seat]["invalid"] == 0


def test_parse_takes_the_last_whole_legal_name() -> None:
    assert parse_action("I bet", ["Pass", "Bet"]) == 1
    assert parse_action("bet... no, PASS", ["Pass", "Bet"]) == 0
    assert isinstance(parse_action("Bets and passes", ["Pass", "Bet"]), Invalid)  # not whole words
    assert isinstance(parse_action("", ["Pass", "Bet"]), Invalid)
    assert parse_action("bid 11-1 then 1-1", ["1-1", "11-1"]) == 0
    assert parse_action("bid 1-1 then 11-1", ["1-1", "11-1"]) == 1


def test_invalid_reply_plays_a_random_legal_action_and_is_counted() -> None:
    env = OpenSpielGame(game="kuhn_poker")
    env.reset(seed=3)
    env.step("fold")
    assert env.turns[0].valid is False and env.infos["player_0"]["invalid"] == 1
    assert len(env.os_state.history()) == 3  # two deals and one move


def test_chance_comes_from_the_envs_generator() -> None:
    deals = set()
    for seed in range(12):
        a, b = OpenSpielGame(), OpenSpielGame()
        a.reset(seed=seed), b.reset(seed=seed)
        assert a.os_state.history() == b.os_state.history()
        deals.add(tuple(a.os_state.history()))
    assert len(deals) == 6  # every deal of three cards to two players shows up


# ------------------------------------------------------------------ exploitability
def _hand_policy(info_state: str, legal: int) -> list[float]:
    """Kuhn: bet or call with the King, never with the Jack, one third of the time with the Queen."""
    card = int(info_state[0])
    bet = {0: 0.0, 1: 1 / 3, 2: 1.0}[card]
    return [1 - bet, bet] if legal == 2 else [1.0]


def test_exploitability_of_a_hand_built_policy_matches_openspiels() -> None:
    game = pyspiel.load_game("kuhn_poker")
    reference = os_policy.TabularPolicy(game)
    for row, state in enumerate(reference.states):
        reference.action_probability_array[row, state.legal_actions()] = _hand_policy(
            state.information_state_string(), len(state.legal_actions()))
    expected = exploitability.nash_conv(game, reference)
    values = policy_exploitability(OpenSpielConfig(), lambda qs: [_hand_policy(q.observation.info_state, len(q.actions))
                                                                  for q in qs])
    assert values["nash_conv"] == approx64(expected)
    assert values["exploitability"] == approx64(expected / 2)
    assert 0.01 < values["exploitability"] < 0.458  # neither Nash nor uniform


def test_uniform_gives_0458_and_cfr_is_near_nash_in_kuhn() -> None:
    values = policy_exploitability(OpenSpielConfig(), lambda qs: [BOTS["random"].action_probs(q.observation) for q in qs])
    assert values["exploitability"] == approx64(11 / 24)
    assert values["exploitability_uniform"] == approx64(11 / 24)
    assert values["exploitability_cfr"] < 1e-3
    cfr = policy_exploitability(OpenSpielConfig(), lambda qs: [BOTS["cfr"].action_probs(q.observation) for q in qs])
    assert cfr["exploitability"] == pytest.approx(values["exploitability_cfr"])


def test_queries_are_the_prompts_the_env_shows() -> None:
    seen = {}

    def record(queries):
        for q in queries:
            seen[q.observation.info_state] = q.messages
        return [[1 / len(q.actions)] * len(q.actions) for q in queries]

    tabular_policy(OpenSpielConfig(), record)
    assert len(seen) == 12
    env = OpenSpielGame()
    env.reset(seed=0)
    env.step("Bet")
    obs = env.observe(env.agent_selection)
    assert seen[obs.info_state] == env.prompt(env.agent_selection)


def test_bad_probabilities_and_too_large_games_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="summing to 1"):
        policy_exploitability(OpenSpielConfig(), lambda qs: [[0.9, 0.9] for _ in qs])
    with pytest.raises(TooLarge, match="more than 100 information states"):
        policy_exploitability(OpenSpielConfig(game="tic_tac_toe", exploitability_max_states=100), lambda qs: [])


def test_bad_names_and_params_are_config_errors() -> None:
    with pytest.raises(GameLoadError, match="unknown OpenSpiel game 'kuhn'"):
        load_game("kuhn")
    with pytest.raises(GameLoadError, match="no parameter 'cards'"):
        load_game("kuhn_poker", {"cards": 4})
    with pytest.raises(GameLoadError, match="rejects params"):
        load_game("kuhn_poker", {"players": 1})
    with pytest.raises(GameLoadError, match="simultaneous"):
        load_game("matrix_rps")


@pytest.mark.parametrize(("args", "expect"), [
    (["--set", "game.game=kuhn"], "game.game: unknown OpenSpiel game 'kuhn'"),
    (["--set", "game.params={players: 1}"], "kuhn_poker rejects params"),
    (["--set", "game.params={players: two}"], "expected int"),
    (["--set", "game.params={cards: 4}"], "no parameter 'cards'"),
    (["--set", "game.game=tic_tac_toe", "--set", "game.exploitability_max_states=100"], "more than 100 information states"),
    (["--set", "game.game=tic_tac_toe", "--set", "game.view=card_last"], "view: card_last places a poker card"),
])
def test_cli_bad_input_is_one_config_error_line(args: list[str], expect: str) -> None:
    from arena.core.errors import ConfigError
    from arena.rank.eval import main

    with pytest.raises(ConfigError) as err:
        main(["exploitability", str(ROOT / "arena/games/openspiel/kuhn.yaml"), *args])
    assert expect in str(err.value) and "\n" not in str(err.value)


def test_cli_too_large_game_exits_2_with_one_line_before_any_model_loads() -> None:
    proc = subprocess.run([sys.executable, "-m", "arena.eval", "exploitability", "games/openspiel/kuhn.yaml",
                           "--set", "game.game=chess"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "chess() has more than 20000 information states" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("bot", "value"), [("random", 0.458333), ("cfr", 0.000087)])
def test_cli_prints_exploitability_of_scripted_bots(bot: str, value: float, capsys) -> None:
    from arena.rank.eval import main

    assert main(["exploitability", str(ROOT / "arena/games/openspiel/kuhn.yaml"), "--set", f"seats={{'*': 'scripted:{bot}'}}"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("seats' policy"))
    assert float(row.split()[2]) == approx32(value)
    assert "uniform random" in out and "CFR+ (OpenSpiel)" in out


def test_bots_play_their_distribution() -> None:
    rng = np.random.default_rng(0)
    env = OpenSpielGame()
    env.reset(seed=0)
    obs = env.observe(env.agent_selection)
    picks = [BOTS["cfr"](obs, rng) for _ in range(400)]
    probs = BOTS["cfr"].action_probs(obs)
    assert set(picks) <= set(obs.legal)
    assert picks.count(obs.legal[1]) / 400 == within(probs[1], 0.08, "400 draws: 3.2 standard errors at p = 1/2")
