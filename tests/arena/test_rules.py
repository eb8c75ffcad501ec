"""The rules toolbox: parsers return a value or Invalid, never raise; centring is zero-sum."""

from __future__ import annotations


from hypothesis import given
from hypothesis import strategies as st

from arena.core.game import Invalid
from arena.core.rules import boxed, centred, last_integer, one_of
from arena.testing import completions
from tolerance import approx64, scale_of


def test_last_integer() -> None:
    assert last_integer("I pick 3, no, 12") == 12
    assert last_integer("-4 degrees") == -4
    assert last_integer("pi is 3.14") == Invalid(reason="no whole number found")
    assert last_integer("choose 11", lo=1, hi=10) == Invalid(reason="11 is outside 1..10")
    assert last_integer("choose 0", lo=1) == Invalid(reason="0 is outside 1..")
    assert last_integer("choose 10", lo=1, hi=10) == 10


def test_one_of_and_boxed() -> None:
    assert one_of("I say Rock, then PAPER.", ["rock", "paper", "scissors"]) == "paper"
    assert one_of("I say Rock, then PAPER.", ["rock", "paper"], last=False) == "rock"
    assert one_of("rocky paperless", ["rock", "paper"]) == Invalid(reason="none of rock, paper found")
    assert one_of("go north-east", ["north", "north-east"]) == "north-east"
    assert boxed("so \\boxed{ 42 } and \\boxed{7}") == "7"
    assert boxed("\\boxed{a{b}c}") == "a{b}c"
    assert isinstance(boxed("\\boxed{  }"), Invalid) and isinstance(boxed("\\boxed{7"), Invalid)


def test_centred_sums_to_zero() -> None:
    out = centred({"a": 3.0, "b": 1.0, "c": -1.0})
    assert out == {"a": 2.0, "b": 0.0, "c": -2.0}
    assert centred({}) == {}


@given(text=completions(max_size=300))
def test_parsers_never_raise(text: str) -> None:
    for value in (last_integer(text, 0, 9), one_of(text, ["yes", "no"]), boxed(text)):
        assert isinstance(value, (int, str, Invalid))


@given(values=st.dictionaries(st.text(max_size=3), st.floats(-1e6, 1e6), max_size=8))
def test_centred_is_zero_sum(values: dict[str, float]) -> None:
    assert sum(centred(values).values()) == approx64(0.0, scale=scale_of(values))
