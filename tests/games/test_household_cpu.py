"""The household game's CPU switches: an opened reply (``action_prefix``) and nearest-action matching."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from arena.core.game import Invalid
from arena.games.household import HouseholdGame
from arena.games.household.actions import nearest_action, parse_action

MOVES = ["go to cabinet 1", "go to towelholder 1", "take soapbar 2 from cabinet 1", "look", "inventory"]


def test_nearest_action_by_word_overlap_with_ties_to_the_first() -> None:
    # {towelholder, 1} shared with two actions; Jaccard 2/7 for 'go to towelholder 1' (7 words in the union)
    # against 1/8 for 'go to cabinet 1' (only '1'): the towel holder wins.
    assert nearest_action("Take an item like the towelholder 1", MOVES) == "go to towelholder 1"
    # Only glue words shared: no action.
    assert nearest_action("go to the", MOVES) is None
    assert nearest_action("", MOVES) is None
    # 'cabinet 1' shares two words with 'go to cabinet 1' (2/4) and with the take (2/6): the closer wins.
    assert nearest_action("cabinet 1", MOVES) == "go to cabinet 1"
    # An exact tie goes to the action listed first.
    assert nearest_action("look inventory", ["inventory", "look"]) == "inventory"


def test_parse_exact_mode_is_unchanged_and_nearest_reads_more() -> None:
    assert isinstance(parse_action("<action>towelholder 1", MOVES, False), Invalid)
    assert parse_action("<action>towelholder 1", MOVES, False, "nearest") == "go to towelholder 1"
    assert parse_action("I would look around", MOVES, False, "nearest") == "look"
    assert parse_action("<action>look</action> then <action>cabinet 1", MOVES, False, "nearest") == "go to cabinet 1"
    assert parse_action("<action>inventory</action>", MOVES, False, "nearest") == "inventory"
    assert isinstance(parse_action("<action>fly away</action>", MOVES, False, "nearest"), Invalid)
    # require_think still applies to the opened tag.
    assert isinstance(parse_action("<action>look", MOVES, True, "nearest"), Invalid)
    assert parse_action("<think>x</think><action>look", MOVES, True, "nearest") == "look"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_nearest_never_raises_and_returns_admissible(text: str) -> None:
    got = parse_action(text, MOVES, False, "nearest")
    assert isinstance(got, Invalid) or got in MOVES


def test_prefix_opens_the_reply_for_the_seat_and_the_probes() -> None:
    game = HouseholdGame(attempts=2, action_prefix="<action>", action_match="nearest", require_think=False,
                         skills={"probes": True}, task_types="in_domain")
    game.reset(seed=3)
    seat = game.agent_selection
    messages = game.render_messages(game.observe_seat(seat))
    assert messages[-1] == {"role": "assistant", "content": "<action>", "continue_final": True}
    for probe in game.probe_prompts(seat).values():
        assert probe[-1] == messages[-1]
    moves = sorted(game.attempts[seat].moves)
    # The completion continues the prefix: 'look</action>' is the whole action.
    assert game.parse(seat, "look</action>") == "look"
    target = next(m for m in moves if m.startswith("go to "))
    assert game.parse(seat, target.removeprefix("go to ") + " please") == target
    assert game.approximate == 1


def test_approximate_rate_is_reported() -> None:
    game = HouseholdGame(attempts=1, action_prefix="<action>", action_match="nearest", require_think=False)
    game.reset(seed=5)
    assert game.episode_metrics()["approximate_rate"] == 0.0
