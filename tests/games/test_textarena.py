"""TextArena games as arena games: the kit, TextArena's own verdicts and rewards, seeding, bad input
(the spec: arena/games/textarena/__init__.py). TextArena runs for real; nothing is mocked."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import textarena as ta
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.core.errors import ConfigError
from arena.core.types import Episode
from arena.loop.config import load_config
from arena.testing import check_any_text_is_legal, check_game, completions, play_texts
from arena.games.textarena import TextArenaGame, bridge
from arena.games.textarena.bots import BOTS, quoted_actions

ROOT = Path(__file__).resolve().parents[2]
SPIRAL = ("TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0")
#: Moves TextArena accepts at most, per game (see the module docstring's bounds).
MOVES = {"TicTacToe-v0": 9, "KuhnPoker-v0": 9, "SimpleNegotiation-v0": 11}
NA = {"invalid": {"mode": "na"}}


def _texts(env_id: str) -> st.SearchStrategy[list[str]]:
    """Replies a model might give: the game's own quoted moves, near misses and any text."""
    examples = list(TextArenaGame(env_id=env_id).action_space("player_0").examples)
    near = ["4", "[ 4 ]", "[9]", "check", "[CALL]", "[Offer: 1 Wheat -> 1 Ore]", "[Offer: 99 Ore -> 1 Wheat]", "[Accept]"]
    one = st.one_of(st.sampled_from(examples + near), st.text(max_size=30))
    return st.lists(one, min_size=1, max_size=12)


@pytest.mark.parametrize("env_id", SPIRAL)
@pytest.mark.parametrize("invalid", [{"mode": "na"}, {"mode": "retry", "retries": 2, "penalty": -0.5}],
                         ids=["na", "retry"])
def test_conformance_kit(env_id: str, invalid: dict) -> None:
    check_game(lambda: TextArenaGame(env_id=env_id, invalid=invalid), bot=BOTS["default"])


@pytest.mark.parametrize("env_id", SPIRAL)
@settings(max_examples=30)
@given(texts=completions())
def test_any_string_is_a_legal_input(env_id: str, texts: str) -> None:
    check_any_text_is_legal(lambda: TextArenaGame(env_id=env_id), [texts, "[0]", "[check]"])


def _replay_directly(ep: Episode, env_id: str) -> dict[str, float]:
    """Play the episode's replies straight into TextArena (no adapter): every prompt must be the
    observation TextArena gives, and its rewards are returned."""
    direct = ta.make(env_id)
    direct.reset(num_players=2, seed=int(ep.info["textarena_seed"]))  # type: ignore[arg-type]
    for turn in ep.turns:
        pid, observation = direct.get_observation()
        assert turn.seat == f"player_{pid}", f"turn {turn.index}: TextArena waits for player {pid}"
        assert turn.messages[-1]["content"] == observation
        assert turn.messages[0]["content"] == bridge.STANDARD_GAME_PROMPT
        direct.step(turn.completion)
    assert direct.state.done
    return {f"player_{pid}": float(r) for pid, r in direct.state.rewards.items()}


@pytest.mark.parametrize("env_id", SPIRAL)
@settings(max_examples=25)
@given(texts=st.data(), seed=st.integers(0, 2**16))
def test_prompts_verdicts_and_returns_are_textarenas(env_id: str, texts: st.DataObject, seed: int) -> None:
    """In na mode every reply reaches TextArena: the prompts are its observations, a turn is invalid
    exactly when TextArena says so, and the returns are its rewards."""
    replies = texts.draw(_texts(env_id))
    ep = play_texts(TextArenaGame(env_id=env_id, **NA), seed, replies)
    assert not ep.truncated
    assert ep.rewards == _replay_directly(ep, env_id)
    assert ep.metrics["textarena_invalid"] == sum(not t.valid for t in ep.turns)


@pytest.mark.parametrize("env_id", SPIRAL)
@settings(max_examples=25)
@given(texts=st.data(), seed=st.integers(0, 2**16), retries=st.integers(0, 2), allowance=st.integers(0, 2))
def test_episode_ends_within_the_turn_bound(env_id: str, texts: st.DataObject, seed: int, retries: int,
                                            allowance: int) -> None:
    replies = texts.draw(_texts(env_id))
    game = TextArenaGame(env_id=env_id, error_allowance=allowance, invalid={"mode": "retry", "retries": retries})
    ep = play_texts(game, seed, replies)
    assert not ep.truncated and ep.outcome
    assert len(ep.turns) <= MOVES[env_id] * (allowance + 1) * (retries + 1)
    if game.zero_sum and not any(t.retried or not t.valid for t in ep.turns):
        assert sum(ep.rewards.values()) == 0


# ------------------------------------------------------------------ invalid moves, by hand
def test_two_invalid_moves_in_a_row_lose_for_the_mover_textarenas_allowance() -> None:
    # Player 0 opens tic-tac-toe; "x" twice: TextArena forgives one, the second ends the game.
    ep = play_texts(TextArenaGame(env_id="TicTacToe-v0", **NA), 0, ["x"])
    assert [(t.seat, t.valid) for t in ep.turns] == [("player_0", False), ("player_0", False)]
    assert "does not follow the correct format" in (ep.turns[0].invalid_reason or "")
    assert ep.rewards == {"player_0": -1.0, "player_1": 1.0}  # player_1 never moved: paid all the same
    assert ep.outcome["player_1"].rank == 1 and ep.metrics["forfeit"] == 1.0
    assert "attempted an invalid move" in ep.turns[1].messages[-1]["content"]  # TextArena's own message


def test_arena_retries_come_first_and_textarena_never_sees_them() -> None:
    game = TextArenaGame(env_id="TicTacToe-v0", invalid={"mode": "retry", "retries": 1, "penalty": -0.5})
    ep = play_texts(game, 0, ["x", "[4]", "[4]", "[0]", "[1]", "[3]", "[2]", "[5]", "[6]", "[7]", "[8]"])
    first = ep.turns[0]
    assert first.retried and not first.valid and first.reward == -0.5
    assert ep.turns[1].valid and ep.turns[1].completion == "[4]"
    assert "could not be used" in ep.turns[1].messages[-1]["content"]  # arena's retry feedback
    assert "attempted an invalid move" not in ep.turns[1].messages[1]["content"]  # TextArena saw nothing
    assert ep.metrics["textarena_invalid"] == 0
    # player_1's "[4]" is taken: invalid, retried with "[0]"
    assert ep.turns[2].invalid_reason == "cell 4 is already occupied." and ep.turns[3].valid


def test_error_allowance_zero_loses_on_the_first_invalid_move() -> None:
    ep = play_texts(TextArenaGame(env_id="KuhnPoker-v0", error_allowance=0, **NA), 0, ["[call]"])
    assert len(ep.turns) == 1 and ep.turns[0].seat == "player_1"  # TextArena's player 1 opens round 1
    assert ep.rewards == {"player_0": 1.0, "player_1": -1.0}


def test_a_reply_textarena_crashes_on_is_an_invalid_move() -> None:
    huge = "[" + "7" * 5000 + "]"  # int() refuses more than 4300 digits
    ep = play_texts(TextArenaGame(env_id="TicTacToe-v0", **NA), 0, [huge])
    assert ep.turns[0].invalid_reason.startswith("TextArena raised ValueError")  # type: ignore[union-attr]
    assert ep.metrics["textarena_errors"] == 2 and ep.rewards == {"player_0": -1.0, "player_1": 1.0}


def test_negotiation_talk_is_free_text_and_a_bad_offer_is_invalid() -> None:
    game = TextArenaGame(env_id="SimpleNegotiation-v0", **NA)
    game.reset(seed=0)
    assert game.phase.free_text
    assert game.parse("player_0", "Hello, shall we trade?") == "Hello, shall we trade?"
    bad = game.parse("player_0", "[Offer: 999 Ore -> 1 Wheat]")
    assert "without having the necessary resources" in bad.reason


# ------------------------------------------------------------------ seeds and global random state
def test_seed_drives_textarenas_deal_and_leaves_global_random_alone() -> None:
    random.seed(123)
    np.random.seed(123)
    before = (random.getstate(), np.random.get_state()[1].copy())
    cards = set()
    for seed in range(12):
        game = TextArenaGame(env_id="KuhnPoker-v0")
        game.reset(seed=seed)
        text = game.observe("player_1").observation
        cards.add(text.split("Your card is: ")[1][:3])
        again = TextArenaGame(env_id="KuhnPoker-v0")
        again.reset(seed=seed)
        assert again.observe("player_1") == game.observe("player_1")
    assert cards == {"'J'", "'Q'", "'K'"}  # the seed, not a constant, picks the card
    assert random.getstate() == before[0] and np.array_equal(np.random.get_state()[1], before[1])


def test_quoted_bot_only_plays_moves_textarena_offers() -> None:
    for env_id in ("TicTacToe-v0", "KuhnPoker-v0"):
        for seed in range(5):
            game = TextArenaGame(env_id=env_id)
            game.reset(seed=seed)
            rng = np.random.default_rng(seed)
            while not game.done:
                seat = game.agent_selection
                game.step(BOTS["quoted"](game.observe(seat), rng))
                assert game.turns[-1].valid, game.turns[-1].invalid_reason
    assert quoted_actions("Available Moves: '[0]', '[4]'\n") == ["[0]", "[4]"]


# ------------------------------------------------------------------ configuration
def test_an_unknown_env_id_is_a_one_line_config_error_naming_valid_ids(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(str(ROOT / "arena/games/textarena/tictactoe.yaml"), ["game.env_id=TicTacTo-v0"])
    line = str(err.value)
    assert "\n" not in line and "game.env_id" in line and "'TicTacTo-v0'" in line and "TicTacToe-v0" in line
    with pytest.raises(ConfigError, match="game: num_players: TicTacToe-v0 cannot be reset for 3"):
        load_config(str(ROOT / "arena/games/textarena/tictactoe.yaml"), ["game.num_players=3"])
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("game: {name: textarena, env_id: NoSuchGame-v9}\n")
    run = subprocess.run([sys.executable, "-m", "arena.play", str(cfg), "--policy", "scripted"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "game.env_id" in run.stderr and "KuhnPoker-v0" in run.stderr


@pytest.mark.parametrize("name", ["tictactoe", "kuhn_poker", "simple_negotiation"])
def test_yamls_load_with_spirals_recipe(name: str) -> None:
    cfg = load_config(str(ROOT / f"arena/games/textarena/{name}.yaml"))
    est = cfg.learner.estimators["turn"]
    assert est.name == "rae" and est.credit == "trajectory"
    assert cfg.game.make_env().zero_sum is True


def test_ids_other_than_spirals_play_and_are_not_declared_zero_sum() -> None:
    game = TextArenaGame(env_id="ConnectFour-v0")
    assert game.zero_sum is False
    check_any_text_is_legal(lambda: TextArenaGame(env_id="ConnectFour-v0"), ["[3]", "[4]", "no"])


# ------------------------------------------------------------------ the built-in model, through arena.play
@pytest.mark.slow
def test_builtin_model_plays_each_game_through_arena_play(tmp_path: Path) -> None:
    from arena.play import main

    for name in ("tictactoe", "kuhn_poker", "simple_negotiation"):
        out = tmp_path / f"{name}.jsonl"
        rc = main([str(ROOT / f"arena/games/textarena/{name}.yaml"), "--episodes", "1", "--jsonl", str(out),
                   "--set", "game.max_turns=2", "--set", "policies.learner.sampling.max_new_tokens=4"])
        assert rc == 0
        ep = Episode.model_validate_json(out.read_text().splitlines()[0])
        assert ep.turns and all(t.policy == "learner" and t.completion_ids for t in ep.turns)
        assert ep.turns[0].messages[-1]["content"].startswith("\n")  # TextArena's observation, as it gives it
