"""The protocol's pure parts: fitting prompts into a context, the Completion record."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from arena.policies.base import MIN_PROMPT_TOKENS, Completion, fit_prompt, overflow_completion


def test_a_prompt_that_fits_is_unchanged() -> None:
    ids = list(range(40))
    assert fit_prompt(ids, 24, 64, "truncate") == (ids, 24)
    assert fit_prompt(ids, 24, 64, "end") == (ids, 24)


def test_truncate_keeps_the_last_tokens_and_the_budget() -> None:
    ids = list(range(100))
    assert fit_prompt(ids, 10, 50, "truncate") == (list(range(60, 100)), 10)


def test_end_gives_none() -> None:
    assert fit_prompt(list(range(100)), 10, 50, "end") is None


def test_a_budget_that_fills_the_context_gives_way_to_a_few_prompt_tokens() -> None:
    # max_len - max_new_tokens = 4 < MIN_PROMPT_TOKENS: keep 16 prompt tokens, budget 64 - 16.
    assert fit_prompt(list(range(100)), 60, 64, "truncate") == (list(range(84, 100)), 48)
    # The budget alone exceeds the context: a short prompt stays whole, the budget shrinks.
    assert fit_prompt(list(range(5)), 100, 50, "truncate") == (list(range(5)), 45)
    # A context of 2: one prompt token and one new token.
    assert fit_prompt(list(range(9)), 8, 2, "truncate") == ([8], 1)


def test_scoring_without_new_tokens_keeps_max_len_tokens() -> None:
    assert fit_prompt(list(range(100)), 0, 30, "truncate") == (list(range(70, 100)), 0)


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match=r"overflow must be one of \('truncate', 'end'\), got 'drop'"):
        fit_prompt([1, 2], 4, 64, "drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_len must be at least 2"):
        fit_prompt([1, 2], 4, 1, "truncate")


@given(
    n=st.integers(0, 300), budget=st.integers(0, 300), max_len=st.integers(2, 300),
    overflow=st.sampled_from(["truncate", "end"]),
)
def test_fit_prompt_invariants(n: int, budget: int, max_len: int, overflow: str) -> None:
    ids = list(range(1000, 1000 + n))
    fitted = fit_prompt(ids, budget, max_len, overflow)  # type: ignore[arg-type]
    fits = n + budget <= max_len
    if fitted is None:
        assert overflow == "end" and not fits
        return
    kept, new_budget = fitted
    if fits:
        assert (kept, new_budget) == (ids, budget)
        return
    assert len(kept) + new_budget <= max_len
    assert kept == ids[n - len(kept) :], "a suffix of the prompt"
    assert new_budget <= budget and (new_budget >= 1 or budget == 0)
    assert len(kept) >= min(n, MIN_PROMPT_TOKENS, max_len - 1)
    if max_len - budget >= min(n, MIN_PROMPT_TOKENS):
        assert new_budget == budget, "the budget is kept while a few prompt tokens fit beside it"


def test_completion_finish_reasons() -> None:
    over = overflow_completion()
    assert (over.text, over.prompt_ids, over.completion_ids, over.finish_reason) == ("", [], [], "overflow")
    assert not over.prompt_truncated and over.score is None
    with pytest.raises(ValidationError):
        Completion(text="x", finish_reason="abort")  # type: ignore[arg-type]
