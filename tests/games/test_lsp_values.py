"""LSP's pure rules (arena/games/lsp/rules.py) against hand-computed values.

Each case is chosen so that a plausible one-line slip (an off-by-one bound, the first
match instead of the last, swapped signs, a dropped strip) changes the answer; the
mutation run (``make mutation``) checks that they do.
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.core.game import Invalid
from arena.testing import completions
from arena.games.lsp.rules import (
    _eval,
    arithmetic_reward,
    arithmetic_target,
    challenger_reward,
    code_share,
    distinct_n,
    extract_query,
    final_number,
    mean,
    mostly_code,
    parse_reward,
    parse_score,
    solver_rewards,
    words,
)

S, E = "[Start Generation]", "[End Generation]"
NO_QUERY = Invalid(reason=f"no query between {S} and {E}")
EMPTY = Invalid(reason="the query is empty")
Q = f"{S}\nWhat is 12 + 30?\n{E}"


# ------------------------------------------------------------------ extract_query
def test_query_between_the_markers_strict() -> None:
    assert extract_query(f"{S}What is 2+2?{E}") == "What is 2+2?"  # markers at position 0
    assert extract_query(f"plan: {S}  Q one  {E} tail {S}Q two{E}") == "Q one"  # the first pair
    assert extract_query(f"{S}{E}") == EMPTY  # END right after START: an empty query, not a missing one
    assert extract_query(f"{S} \n {E}") == EMPTY
    assert extract_query(f"{S}no end") == NO_QUERY  # strict needs the end marker
    assert extract_query("just a line") == NO_QUERY
    assert extract_query("") == NO_QUERY


def test_query_lenient_fallbacks() -> None:
    assert extract_query(f"{S} open ended ", fmt="lenient") == "open ended"
    assert extract_query(f"x{S}ab{E}", fmt="lenient") == "ab"
    assert extract_query("\n   \n first line \nsecond", fmt="lenient") == "first line"
    assert extract_query(f"head{E}tail", fmt="lenient") == "head"  # END splits lines
    assert extract_query(f"{E}tail", fmt="lenient") == "tail"
    assert extract_query("   \n\t", fmt="lenient") == EMPTY  # no non-empty line
    assert extract_query(f"{S}   ", fmt="lenient") == EMPTY
    assert extract_query("a line", fmt="strict") == NO_QUERY
    assert extract_query("a line", fmt="other") == NO_QUERY  # only "lenient" relaxes


def test_query_is_cut_to_max_chars_after_stripping() -> None:
    assert extract_query(f"{S}  abcdef{E}", max_chars=3) == "abc"  # stripped before the cut
    assert extract_query(f"{S}ab cd{E}", max_chars=3) == "ab"  # and after it
    long = "q" * 2001
    assert extract_query(f"{S}{long}{E}") == "q" * 2000  # the default cap
    assert extract_query(f"{S}{long}{E}", max_chars=2001) == long


# ------------------------------------------------------------------ judge and reward seats
def test_score_is_the_last_tag_in_range() -> None:
    assert parse_score("<Score>1</Score> then <Score>2</Score> finally <Score>3</Score>") == 3
    assert parse_score("<Score>0</Score>") == 0 and parse_score("<Score>7</Score>") == 7
    assert parse_score("<Score>8</Score>") is None and parse_score("<Score>5</Score><Score>9</Score>") is None
    assert parse_score("<score> 4 </score>") == 4  # case and spaces
    assert parse_score("reasoning... <Score> 6") == 6  # closing tag cut off at the very end
    assert parse_score("<Score>6 and more") is None
    assert parse_score("no tag 5") is None and parse_score("") is None


def test_reward_seat_text_to_float() -> None:
    assert parse_reward(" 0.25\n") == 0.25
    assert parse_reward("-3") == -3.0
    assert parse_reward("nan") is None and parse_reward("inf") is None and parse_reward("-inf") is None
    assert parse_reward("1e999") is None  # overflows to inf
    assert parse_reward("0.5 points") is None and parse_reward("") is None


# ------------------------------------------------------------------ verifier
def test_arithmetic_target_precedence_and_order() -> None:
    assert arithmetic_target("What is 2 + 3 * 4?") == 14
    assert arithmetic_target("10 - 3 - 2 =") == 5  # left to right: not 10 - (3 - 2)
    assert arithmetic_target("5 - 8") == -3
    assert arithmetic_target("7*6") == 42 and arithmetic_target("3×4") == 12 and arithmetic_target("3 x 5") == 15
    assert arithmetic_target("1,000 + 2") == 1002


def test_the_evaluator_refuses_anything_but_integer_add_sub_mul() -> None:
    # arithmetic_target's pattern only lets such expressions through; the evaluator still refuses the rest
    assert _eval(ast.parse("2 + 3 * 4 - 1", mode="eval").body) == 13
    for expr in ("x", "6 / 3", "2 ** 3", "1.5 + 1", "-(1)"):
        with pytest.raises(ValueError, match=r"^not integer \+ - \* arithmetic$"):
            _eval(ast.parse(expr, mode="eval").body)


def test_arithmetic_target_limits_and_fallthrough() -> None:
    assert arithmetic_target("1+2+3+4") == 10  # MAX_OPERANDS = 4 operands is fine
    assert arithmetic_target("123456 + 1") == 123457  # MAX_DIGITS = 6 digits is fine
    assert arithmetic_target("1+2+3+4+5, or else 6*7") == 42  # too many operands: the next expression
    assert arithmetic_target("1234567 + 1, or 2*5") == 10  # too many digits: the next
    assert arithmetic_target("01 + 2, or 3*3") == 9  # not Python syntax (leading zero): the next
    none = Invalid(reason="no checkable arithmetic (integers, + - *, at most 4 operands) in the query")
    assert arithmetic_target("1+2+3+4+5") == none
    assert arithmetic_target("just 12 apples") == none


def test_final_number_and_reward() -> None:
    assert final_number(r"first \boxed{3}, then \boxed{4} and 9") == 4.0  # the last box wins over later numbers
    assert final_number(r"\boxed{x} so 5 and 6") == 6.0  # a box without a number: the last number
    assert final_number("about 1,234 total") == 1234.0
    assert final_number("it is -3.5") == -3.5
    assert final_number("none") is None
    assert arithmetic_reward(14, r"so \boxed{14}") == 1.0
    assert arithmetic_reward(14, r"\boxed{15}") == 0.0
    assert arithmetic_reward(0, "no number at all") == 0.0
    assert arithmetic_reward(0, "0") == 1.0
    assert type(arithmetic_reward(3, "3")) is float


def test_final_number_after_equals() -> None:
    cut = "7 + 5 = 12. To add 7 and 5"  # an answer cut off by the token budget
    assert final_number(cut) == 5.0 and final_number(cut, "after_equals") == 12.0
    assert final_number("3 = 3 and 4 = 4", "after_equals") == 3.0  # the FIRST '=' only
    assert final_number("so x =  -1,200 left 9", "after_equals") == -1200.0
    assert final_number("= 2.5 then 7", "after_equals") == 2.5
    assert final_number("The answer is 12. Not 13", "after_equals") == 13.0  # no '=': the last number
    assert final_number(r"= x, \boxed{8} 9", "after_equals") == 8.0  # '=' without a number: as last
    assert final_number("=", "after_equals") is None
    assert arithmetic_reward(12, cut, "after_equals") == 1.0 and arithmetic_reward(12, cut) == 0.0


# ------------------------------------------------------------------ rewards
def test_reward_formulas_with_asymmetric_values() -> None:
    assert mean([]) == 0.0 and mean([1.0, 2.0, 4.0]) == pytest.approx(7 / 3)
    assert solver_rewards([1.0, 0.0], None) == [1.0, 0.0]
    assert solver_rewards([1.0, 0.0], [0.25, 0.5]) == [1.25, 0.5]
    with pytest.raises(ValueError):
        solver_rewards([1.0, 0.0], [0.5])
    assert challenger_reward([1.0, 0.0, 0.0, 1.0], None) == pytest.approx(-0.5)  # LSP-Zero: -V
    assert challenger_reward([1.0, 1.0, 0.0, 1.0], [0.5, 0.0]) == pytest.approx(-0.75 + 0.25)  # LSP: -V + V_Q
    assert challenger_reward([], None) == 0.0


# ------------------------------------------------------------------ watch metrics
def test_code_share_counts_fenced_and_code_looking_lines() -> None:
    text = "Intro text\n  ```python\nplain words inside\n```\n\n   \nx = 1\nHello there\nMore prose"
    # lines: Intro (prose), "plain words inside" (fenced), x = 1 (code), Hello, More -> 2 / 5
    assert code_share(text) == pytest.approx(0.4)
    assert code_share("def f():\n    return 1\nok") == pytest.approx(2 / 3)
    assert code_share("") == 0.0 and code_share("```\n```") == 0.0


def test_mostly_code_threshold_is_strict() -> None:
    half = "x = 1\nprose here"
    assert code_share(half) == 0.5 and not mostly_code(half)  # exactly the threshold: not more
    assert mostly_code("x = 1\ny = 2\nprose here")
    assert not mostly_code("x = 1\ny = 2\nprose here", threshold=0.7)
    assert mostly_code(half, threshold=0.4)


def test_words_and_distinct_n() -> None:
    assert words(" a  b\nc ") == 3
    # bigrams: (a,b) (b,a) (a,b) | (a,b) (b,c): 3 distinct of 5 (case folded)
    assert distinct_n(["A b a b", "a B c"]) == pytest.approx(0.6)
    # trigrams: (a,b,a) (b,a,b) | (a,b,c): all distinct
    assert distinct_n(["A b a b", "a B c"], n=3) == 1.0
    assert distinct_n(["one two", "two"], n=1) == pytest.approx(2 / 3)
    assert distinct_n(["single"]) == 0.0 and distinct_n([]) == 0.0


# ------------------------------------------------------------------ first hand cases of each rule
def test_query_extraction_strict_and_lenient() -> None:
    assert extract_query(f"Sure! {Q} done") == "What is 12 + 30?"
    assert isinstance(extract_query("What is 12 + 30?"), Invalid)
    assert isinstance(extract_query("[Start Generation] no end"), Invalid)
    assert isinstance(extract_query("[Start Generation]  [End Generation]"), Invalid)
    assert extract_query("[Start Generation] no end", "lenient") == "no end"
    assert extract_query("\n\n  first line?\nsecond", "lenient") == "first line?"
    assert extract_query("[Start Generation]" + "x" * 50 + "[End Generation]", max_chars=10) == "x" * 10


def test_score_parsing_hand_cases() -> None:
    assert parse_score("ok <Calculation>1+1=2</Calculation>\n<Score>2</Score>") == 2
    assert parse_score("<Score>3</Score> then <score> 6 </score>") == 6
    assert parse_score("Justification. <Score>5") == 5  # the stop string cut the closing tag
    assert parse_score("<Score>8</Score>") is None
    assert parse_score("<Score>5 out of 7") is None
    assert parse_score("Score: 5") is None


@given(st.one_of(completions(), st.builds(lambda a, k, b: f"{a}<Score>{k}</Score>{b}", st.text(), st.integers(-5, 99), st.text())))
def test_score_is_none_or_an_integer_in_0_to_7(text: str) -> None:
    k = parse_score(text)
    assert k is None or (isinstance(k, int) and 0 <= k <= 7)


def test_reward_parsing() -> None:
    assert parse_reward(repr(-1.25)) == -1.25
    assert parse_reward(" 3 ") == 3.0
    for bad in ("nan", "inf", "", "1e999", "five"):
        assert parse_reward(bad) is None


def test_arithmetic_verifier() -> None:
    assert arithmetic_target("What is 23 + 45 * 2?") == 113
    assert arithmetic_target("Compute 1,000 x 3 please") == 3000
    assert arithmetic_target("What is 7 - 10?") == -3
    assert isinstance(arithmetic_target("What is A + B?"), Invalid)
    assert isinstance(arithmetic_target("1 + 2 + 3 + 4 + 5"), Invalid)  # too many operands
    assert isinstance(arithmetic_target("1234567 * 2"), Invalid)  # too many digits
    assert final_number("So 23 + 45 = 68.") == 68
    assert final_number("\\boxed{12} and later 13") == 12
    assert final_number("no number") is None
    assert arithmetic_reward(68, "68") == 1.0 and arithmetic_reward(68, "It is 67") == 0.0


def test_code_share_and_diversity() -> None:
    assert code_share("```python\nx = 1\nprint(x)\n```") == 1.0
    assert code_share("def f(a):\n    return a\nThat is the function.") == pytest.approx(2 / 3)
    assert code_share("Paris is the capital of France.\nIt is on the Seine.") == 0.0
    assert code_share("") == 0.0
    assert distinct_n(["a b c", "a b d"], 2) == 0.75  # bigrams: ab bc ab bd -> 3 distinct of 4
    assert distinct_n(["same words", "same words"], 1) == 0.5
    assert distinct_n([], 2) == 0.0


def test_reward_formulas() -> None:
    assert solver_rewards([1.0, 0.0], None) == [1.0, 0.0]
    assert solver_rewards([1.0, 0.0], [3.0, 7.0]) == [4.0, 7.0]
    assert challenger_reward([1.0, 0.0], None) == -0.5
    assert challenger_reward([1.0, 0.0], [3.0, 7.0]) == -0.5 + 5.0
