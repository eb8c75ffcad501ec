"""The exact yardstick's pure parts, value by value (issue #34; fast: no model, in ``make mutation``).

* arena/loop/exact.py: the softmax over the legal actions' scores, and the tokens an action is
  scored as (its text, then the end-of-turn token the chat template closes a reply with);
* arena/games/openspiel/rules.py ``describe``: the Kuhn prompt's card and betting, checked at every
  information state OpenSpiel has against a hand-written table (which player made which move);
* arena/games/openspiel/exact.py: the tabular policy holds each information state's answer in its
  own row, so the exploitability of a hand-built policy is OpenSpiel's.
"""

from __future__ import annotations

import math

import pyspiel
import pytest

from arena.games.openspiel.rules import describe
from arena.loop.exact import action_ids, normalise
from tolerance import approx64


# ------------------------------------------------------------------ arena/loop/exact.py
def test_normalise_is_the_softmax_of_the_scores() -> None:
    assert normalise([0.0, 0.0]) == pytest.approx([0.5, 0.5])
    assert normalise([math.log(1.0), math.log(3.0)]) == approx64([0.25, 0.75])
    assert normalise([-1000.0, -1000.0 + math.log(2.0), -1000.0 + math.log(5.0)]) == pytest.approx([1 / 8, 2 / 8, 5 / 8])
    assert normalise([-2.0]) == [1.0]


@pytest.fixture(scope="module")
def tokenizer():
    """The built-in model's tokenizer (SmolLM2's: the chat template ends a reply with <|im_end|>)."""
    from transformers import AutoTokenizer

    from arena.core.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))


@pytest.mark.parametrize("action", ["Bet", "Pass", "Raise", "mark(1,2)", "3-6"])
def test_an_action_is_scored_as_the_whole_reply_the_chat_template_writes(tokenizer, action: str) -> None:
    """The scored tokens are exactly the assistant turn the template renders for that reply, up to and
    including its end-of-turn token: a reply that goes on after the action name is not the action."""
    from arena.policies.base import chat_prompt_ids

    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Legal actions: Pass, Bet."}]
    prompt = chat_prompt_ids(tokenizer, messages)
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": action}], tokenize=True)
    full = list(full["input_ids"] if hasattr(full, "keys") else full)
    assert full[: len(prompt)] == prompt
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    reply = full[len(prompt): full.index(end, len(prompt)) + 1]  # the assistant's turn, through its end token
    assert action_ids(tokenizer, action) == reply
    assert action_ids(tokenizer, action)[-1] == end and tokenizer.decode(action_ids(tokenizer, action)[:-1]) == action


# ------------------------------------------------------------------ rules.describe (Kuhn)
CARDS = {"0": "Jack", "1": "Queen", "2": "King", "3": "card 3"}
# Who made each move, by the information state's betting string (two players: player 0 opens).
BETTING_2 = {"": "no moves yet", "p": "Player 0: Pass", "b": "Player 0: Bet", "pb": "Player 0: Pass; Player 1: Bet"}
BETTING_3 = BETTING_2 | {"pp": "Player 0: Pass; Player 1: Pass", "pbp": "Player 0: Pass; Player 1: Bet; Player 2: Pass",
                         "bp": "Player 0: Bet; Player 1: Pass", "ppb": "Player 0: Pass; Player 1: Pass; Player 2: Bet",
                         "pbb": "Player 0: Pass; Player 1: Bet; Player 2: Bet", "bb": "Player 0: Bet; Player 1: Bet",
                         "ppbp": "Player 0: Pass; Player 1: Pass; Player 2: Bet; Player 0: Pass",
                         "ppbb": "Player 0: Pass; Player 1: Pass; Player 2: Bet; Player 0: Bet"}


def _decision_states(game):
    stack = [game.new_initial_state()]
    while stack:
        state = stack.pop()
        if state.is_terminal():
            continue
        if not state.is_chance_node():
            yield state
        actions = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
        stack.extend(state.child(a) for a in actions)


@pytest.mark.parametrize(("players", "table"), [(2, BETTING_2), (3, BETTING_3)])
def test_kuhn_prompt_names_the_card_and_who_made_each_move_at_every_information_state(players: int, table) -> None:
    game = pyspiel.load_game("kuhn_poker", {"players": players})
    seen = set()
    for state in _decision_states(game):
        player = state.current_player()
        raw = state.information_state_string(player)
        seen.add(raw[1:])
        expected = f"Your card: {CARDS[raw[0]]}. Betting so far: {table[raw[1:]]}."
        assert describe("kuhn_poker", state, player) == expected, raw
    assert seen <= set(table) and {"", "p", "b", "pb"} <= seen


def test_kuhn_prompt_by_hand() -> None:
    state = pyspiel.load_game("kuhn_poker").new_initial_state()
    for action in (2, 0, 0, 1):  # deal King to player 0, Jack to player 1; player 0 passes, player 1 bets
        state.apply_action(action)
    assert describe("kuhn_poker", state, 0) == "Your card: King. Betting so far: Player 0: Pass; Player 1: Bet."


# ------------------------------------------------------------------ arena/games/openspiel/exact.py
def test_each_information_state_gets_its_own_answer() -> None:
    """A policy that bets with probability depending on the card AND the betting so far: the table holds
    each answer in its own row, so its NashConv is OpenSpiel's for the same table built by hand."""
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability

    from arena.games.openspiel import OpenSpielConfig
    from arena.games.openspiel.exact import tabular_policy

    bets = {"0": 0.1, "0p": 0.2, "0b": 0.05, "0pb": 0.0, "1": 0.3, "1p": 0.4, "1b": 0.35, "1pb": 0.5,
            "2": 0.7, "2p": 0.9, "2b": 1.0, "2pb": 0.95}
    game = pyspiel.load_game("kuhn_poker")
    reference = os_policy.TabularPolicy(game)
    for row, state in enumerate(reference.states):
        b = bets[state.information_state_string()]
        reference.action_probability_array[row] = [1 - b, b]
    table = tabular_policy(OpenSpielConfig(), lambda qs: [[1 - bets[q.observation.info_state], bets[q.observation.info_state]]
                                                          for q in qs])
    assert (table.action_probability_array == reference.action_probability_array).all()
    assert exploitability.nash_conv(game, table) == approx64(exploitability.nash_conv(game, reference))


def test_other_games_show_the_board_or_openspiels_string() -> None:
    ttt = pyspiel.load_game("tic_tac_toe").new_initial_state()
    ttt.apply_action(4)
    assert describe("tic_tac_toe", ttt, 1) == "Board (rows 0-2, columns 0-2; '.' is empty):\n...\n.x.\n..."
    leduc = pyspiel.load_game("leduc_poker").new_initial_state()
    leduc.apply_action(0)
    leduc.apply_action(1)
    assert describe("leduc_poker", leduc, 0, "openspiel") == ("Your information state (OpenSpiel's string): "
                                                              + leduc.information_state_string(0))
    assert describe("leduc_poker", leduc, 0) == ("Your card: Jack. Public card: not dealt yet (after round 1). "
                                                 "Round 1: no moves yet. Pot: 2 chips.")
    kuhn = pyspiel.load_game("kuhn_poker").new_initial_state()
    kuhn.apply_action(0)
    kuhn.apply_action(1)
    assert describe("leduc_poker", kuhn, 0) == "Your information state (OpenSpiel's string): 0"  # by name, not shape
    liars = pyspiel.load_game("liars_dice").new_initial_state()
    liars.apply_action(0)
    liars.apply_action(0)
    assert describe("liars_dice", liars, 0) == "Your information state (OpenSpiel's string): " + liars.information_state_string(0)
