"""Household's action parsing against hand values (arena/games/household/actions.py): the tests mutation
testing runs for that module, so each rule of the docstring is pinned by an exact value."""

from __future__ import annotations

import pytest

from arena.core.game_types import Invalid
from arena.games.household.actions import format_action, nearest_action, normalise, parse_action

MOVES = ["look", "inventory", "go to cabinet 1", "go to towelholder 1", "take towel 1 from towelholder 1",
         "put towel 1 in/on cabinet 1"]


@pytest.mark.parametrize(("text", "want"), [
    ("look", "look"),
    ("  LOOK.  ", "look"),
    ('"go   to\tcabinet 1"', "go to cabinet 1"),
    ("'inventory'", "inventory"),
    ("`look`", "look"),
    ("X-RAY 1", "x-ray 1"),  # only quotes are stripped from the ends, not other characters
    ("XLOOKX", "xlookx"),
    (" ' look ' ", "look"),  # quotes inside the spaces go, then the spaces inside them
    ("look. ", "look"),
    ("look..", "look"),  # every trailing full stop goes
    ("put towel 1 in cabinet 1", "put towel 1 in/on cabinet 1"),
    ("put towel 1 on cabinet 1", "put towel 1 in/on cabinet 1"),
    ("Put towel 1 into cabinet 1.", "put towel 1 in/on cabinet 1"),
    ("put towel 1 onto cabinet 1", "put towel 1 in/on cabinet 1"),
    ("put towel 1 in/on cabinet 1", "put towel 1 in/on cabinet 1"),
    ("put towel 1 in the box in cabinet 1", "put towel 1 in/on the box in cabinet 1"),  # the first preposition splits
    ("put towel 1", "put towel 1"),  # no preposition: left as it is
    ("input towel 1 in cabinet 1", "input towel 1 in cabinet 1"),  # only a text that starts with "put "
    ("", ""),
])
def test_normalise(text: str, want: str) -> None:
    assert normalise(text) == want


def test_nearest_action_scores_jaccard_of_words() -> None:
    # {towel, 1} against "take towel 1 from towelholder 1" {take, towel, 1, from, towelholder}: 2/5;
    # against "put towel 1 in/on cabinet 1" {put, towel, 1, in, on, cabinet}: 2/6; against "go to towelholder 1": 1/4
    assert nearest_action("towel 1", MOVES) == "take towel 1 from towelholder 1"
    # {cabinet, 1}: "go to cabinet 1" 2/4 beats "put towel 1 in/on cabinet 1" 2/6
    assert nearest_action("Cabinet 1!", MOVES) == "go to cabinet 1"
    # a tie goes to the action listed first
    assert nearest_action("look inventory", ["inventory", "look"]) == "inventory"
    assert nearest_action("look inventory", ["look", "inventory"]) == "look"
    # a strictly better later action wins over an earlier one
    assert nearest_action("take towel", ["go to towelholder 1", "take towel 1 from towelholder 1"]) == (
        "take towel 1 from towelholder 1")


def test_nearest_action_needs_a_word_beyond_the_glue() -> None:
    assert nearest_action("go to the", MOVES) is None
    assert nearest_action("in on with from a an", MOVES) is None
    assert nearest_action("", MOVES) is None
    assert nearest_action("look", []) is None
    assert nearest_action("zebra", MOVES) is None
    # glue words still count towards the score once another word is shared:
    # "go to cabinet" {go, to, cabinet}: "go to cabinet 1" 3/4, "put towel 1 in/on cabinet 1" 1/8
    assert nearest_action("go to cabinet", MOVES) == "go to cabinet 1"
    # "1" is not glue: a bare number names an action
    assert nearest_action("1", ["look", "go to cabinet 1"]) == "go to cabinet 1"


def test_exact_parse_reads_the_last_action_after_a_think() -> None:
    assert parse_action(format_action("look"), MOVES) == "look"
    assert parse_action("<THINK>hm</THINK><Action> Go To Cabinet 1. </ACTION>", MOVES) == "go to cabinet 1"
    text = "<think>a</think><action>look</action> no, <action>inventory</action>"
    assert parse_action(text, MOVES) == "inventory"
    # the think may come anywhere before the LAST action, even before an earlier one
    assert parse_action("<think>a</think><action>zebra</action><action>look</action>", MOVES) == "look"
    assert parse_action("<think>multi\nline</think>\n<action>\nlook\n</action>", MOVES) == "look"
    assert parse_action("<action>put towel 1 on cabinet 1</action>", MOVES, require_think=False) == (
        "put towel 1 in/on cabinet 1")


@pytest.mark.parametrize(("text", "reason"), [
    ("look", "no <action>...</action> found"),
    ("<think>x</think><action>look", "no <action>...</action> found"),  # unclosed: exact mode reads no action
    ("<action>look</action>", "no <think>...</think> before the action"),
    ("<action>look</action><think>x</think>", "no <think>...</think> before the action"),  # a think after it
    ("<think>x<action>look</action></think>", "no <think>...</think> before the action"),  # not closed before it
    ("<think>x</think><action>  . </action>", "empty action"),
    ("<think>x</think><action>fly away</action>", "not an admissible action: 'fly away'"),
    ("<think>x</think><action>" + "z" * 100 + "</action>", "not an admissible action: '" + "z" * 60 + "'"),
])
def test_exact_parse_says_why_it_is_invalid(text: str, reason: str) -> None:
    got = parse_action(text, MOVES)
    assert isinstance(got, Invalid) and got.reason == reason


def test_nearest_parse_reads_more() -> None:
    near = dict(require_think=False, match="nearest")
    assert parse_action("<action>towelholder 1", MOVES, **near) == "go to towelholder 1"  # unclosed: to the end
    assert parse_action("I would look around", MOVES, **near) == "look"  # no tag: the whole text
    # an unclosed tag after the last pair wins; a pair after the last unclosed tag wins
    assert parse_action("<action>look</action> then <action>cabinet 1", MOVES, **near) == "go to cabinet 1"
    assert parse_action("<action>cabinet 1 <action>inventory</action>", MOVES, **near) == "inventory"
    assert parse_action("<action>inventory</action>", MOVES, **near) == "inventory"  # exact still wins
    assert parse_action("<action>put towel 1 onto cabinet 1</action>", MOVES, **near) == "put towel 1 in/on cabinet 1"
    got = parse_action("<action>fly away</action>", MOVES, **near)
    assert isinstance(got, Invalid) and got.reason == "not an admissible action: 'fly away'"
    got = parse_action("", MOVES, **near)
    assert isinstance(got, Invalid) and got.reason == "empty action"


def test_nearest_parse_keeps_the_think_rule() -> None:
    got = parse_action("<action>look", MOVES, True, "nearest")
    assert isinstance(got, Invalid) and got.reason == "no <think>...</think> before the action"
    assert parse_action("<think>x</think><action>look", MOVES, True, "nearest") == "look"
    # no tag at all: the action starts at 0, so no think can come before it
    got = parse_action("<think>x</think> look", MOVES, True, "nearest")
    assert isinstance(got, Invalid) and got.reason == "no <think>...</think> before the action"
    # the think must close before the unclosed tag that is read
    got = parse_action("<think>x <action>look</think>", MOVES, True, "nearest")
    assert isinstance(got, Invalid) and got.reason == "no <think>...</think> before the action"


def test_any_other_match_value_reads_exactly() -> None:
    got = parse_action("<action>towelholder 1", MOVES, False, "fuzzy")
    assert isinstance(got, Invalid) and got.reason == "no <action>...</action> found"


def test_format_action() -> None:
    assert format_action("look") == "<think>I follow the plan.</think><action>look</action>"
    assert format_action("look", "why not") == "<think>why not</think><action>look</action>"
