"""SpyRL value-level tests: asymmetric weights, exact mask rounding, vote boundaries, god
detectors, retry budgets and shuffled outputs, each checked against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from arena.core.game import Invalid
from arena.games.spy import SpyGame
from arena.games.spy.rules import (
    NA,
    mask_span,
    parse_answer,
    parse_vote,
    performing_rewards,
    span_length,
    split_units,
    spy_caught,
    vote_counts,
)
from arena.games.spy.types import SpyConfig
from tolerance import approx64


# ------------------------------------------------------------ performing rewards, beta != lambda
def test_performing_rewards_n3_beta_differs_from_lambda() -> None:
    # n=3, spy=0, m = [2, 1, 0]: mc = (1+0)/2 = 0.5, gap = 1.5, nc = 2; beta 0.3, lambda 0.05.
    r = performing_rewards([2, 1, 0], spy=0, beta=0.3, lam=0.05)
    assert r[0] == pytest.approx(-0.45)  # -0.3 * 1.5
    assert r[1] == pytest.approx(0.3 / 2 * 1.5 - 0.05 * 0.5)  # 0.2
    assert r[2] == pytest.approx(0.3 / 2 * 1.5 + 0.05 * 0.5)  # 0.25
    assert r == pytest.approx([-0.45, 0.2, 0.25])


def test_performing_rewards_n16_beta_differs_from_lambda() -> None:
    # n=16, spy=5 got 6 votes; civilians: player 0 got 4, player 9 got 3, player 15 got 2, others 0.
    counts = [0] * 16
    counts[5], counts[0], counts[9], counts[15] = 6, 4, 3, 2
    beta, lam = 0.2, 0.7
    mc = 9 / 15
    gap = 6 - mc
    r = performing_rewards(counts, spy=5, beta=beta, lam=lam)
    assert r[5] == pytest.approx(-beta * gap)
    for j in (0, 9, 15, 1):
        assert r[j] == pytest.approx(beta / 15 * gap - lam * (counts[j] - mc)), j
    assert r[0] == pytest.approx(0.072 - 2.38)  # 0.2/15*5.4 - 0.7*3.4
    assert sum(r) == approx64(0.0)


def test_performing_rewards_spy_not_at_index_zero_and_no_votes() -> None:
    assert performing_rewards([0, 0, 0, 0], spy=2, beta=0.4, lam=0.9) == [0.0, 0.0, 0.0, 0.0]
    # spy=3 got none, civilians 3, 0, 0: mc = 1, gap = -1.
    assert performing_rewards([3, 0, 0, 0], spy=3, beta=0.4, lam=0.9) == pytest.approx(
        [-0.4 / 3 - 1.8, -0.4 / 3 + 0.9, -0.4 / 3 + 0.9, 0.4]
    )


def test_vote_counts_and_spy_caught() -> None:
    assert vote_counts([True, 1, 1, NA, None, 0], 3) == [1, 2, 0], "a bool is not a vote"
    assert spy_caught([0, 3, 1], spy=1)
    assert not spy_caught([0, 3, 3], spy=1), "a tie at the top is not a catch"
    assert not spy_caught([2, 1, 0], spy=1)
    assert not spy_caught([0, 0, 0], spy=1), "no votes, no catch"
    assert spy_caught([1, 0, 0], spy=0)


# ------------------------------------------------------------ exact rounding of the masked span
@pytest.mark.parametrize(
    ("units", "ratio", "length"),
    [
        (10, 0.2, 2), (10, 0.25, 3), (10, 0.15, 2), (10, 0.35, 4), (10, 0.45, 5), (10, 0.05, 1),
        (10, 0.04, 1), (7, 0.5, 4), (3, 0.1, 1), (5, 0.99, 5), (1, 0.4, 1), (20, 0.4, 8), (8, 0.3125, 3),
        # exact halves that binary floats put just below: 0.58 * 25 == 14.499999999999998
        (25, 0.58, 15), (45, 0.7, 32), (50, 0.29, 15), (50, 0.57, 29),
    ],
)
def test_span_length_rounds_half_up_exactly(units: int, ratio: float, length: int) -> None:
    assert span_length(units, ratio) == length


class FixedStart:
    """A generator stand-in whose ``integers(lo, hi)`` is ``hi - 1`` (the last valid start)."""

    def integers(self, lo: int, hi: int) -> int:
        return hi - 1


@pytest.mark.parametrize("token", ["*", "[MASK]", "##", " "])
def test_mask_chars_exact_span_with_multichar_and_whitespace_tokens(token: str) -> None:
    text = "abcdefghij"  # 10 chars, ratio 0.15 -> 1.5 -> 2 masked, the last start is 8
    view = mask_span(text, 0.15, FixedStart(), unit="chars", token=token)  # type: ignore[arg-type]
    assert (view.start, view.length, view.units) == (8, 2, 10)
    assert view.text == "abcdefgh" + token * 2
    first = mask_span(text, 0.35, np.random.default_rng(0), unit="chars", token=token)
    assert first.length == 4 and first.text == text[: first.start] + token * 4 + text[first.start + 4 :]


class FirstStart:
    """A generator stand-in whose ``integers(lo, hi)`` is ``lo`` (the first valid start)."""

    def integers(self, lo: int, hi: int) -> int:
        return lo


def test_mask_defaults_and_the_first_start() -> None:
    assert mask_span("a b c d", 0.5, FirstStart()).text == "* * c d"  # type: ignore[arg-type]
    view = mask_span("abcd", 0.5, FirstStart(), unit="chars")  # type: ignore[arg-type]
    assert (view.text, view.start, view.length) == ("**cd", 0, 2)


@pytest.mark.parametrize("token", ["*", "[MASK]", " "])
def test_mask_words_exact_span_keeps_whitespace(token: str) -> None:
    text = "one  two\tthree four\nfive six seven eight nine ten"  # 10 words, odd separators
    view = mask_span(text, 0.25, FixedStart(), unit="words", token=token)  # type: ignore[arg-type]
    assert (view.start, view.length, view.units) == (7, 3, 10)
    assert view.text == f"one  two\tthree four\nfive six seven {token} {token} {token}"
    mid = mask_span("a b c d e", 0.5, np.random.default_rng(3), unit="words", token=token)
    words = ["a", "b", "c", "d", "e"]
    words[mid.start : mid.start + 3] = [token] * 3
    assert mid.length == 3 and mid.text == " ".join(words)


def test_mask_span_rejects_bad_input() -> None:
    rng = np.random.default_rng(0)
    for ratio in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=rf"^mask ratio must be in \(0, 1\), got {ratio}$"):
            mask_span("a b c", ratio, rng)
    with pytest.raises(ValueError, match="^cannot mask an empty source$"):
        mask_span("", 0.5, rng, unit="chars")
    with pytest.raises(ValueError, match="^cannot mask a source with no words$"):
        mask_span(" \n\t", 0.5, rng, unit="words")
    assert split_units("a  b\nc", "words") == ["a", "b", "c"]
    assert split_units("ab c", "chars") == ["a", "b", " ", "c"]


@pytest.mark.parametrize("token", [" ", "\t", "a b", "\n*"])
def test_a_mask_token_with_whitespace_is_a_config_error(token: str) -> None:
    with pytest.raises(ValidationError, match="mask_token\n.*must not contain whitespace"):
        SpyConfig(mask_token=token)
    assert SpyConfig(mask_token="[MASK]").mask_token == "[MASK]"


words_st = st.lists(st.sampled_from(["a", "bb", "*", "**", "x*y", "[MASK]", "ccc"]), min_size=1, max_size=30)


@given(words=words_st, seps=st.lists(st.sampled_from([" ", "  ", "\n", "\t "]), min_size=30, max_size=30),
       ratio=st.floats(0.01, 0.99), token=st.sampled_from(["*", "[MASK]", "**"]), seed=st.integers(0, 1000))
def test_mask_tokens_already_in_the_text_do_not_confuse_the_span(
    words: list[str], seps: list[str], ratio: float, token: str, seed: int
) -> None:
    """The source may contain the mask token itself; the view is still exactly the source with
    ONE span of ``span_length`` words replaced, at ``start``, every separator kept."""
    text = "".join(w + s for w, s in zip(words, seps, strict=False))
    view = mask_span(text, ratio, np.random.default_rng(seed), unit="words", token=token)
    n = len(words)
    assert view.units == n and view.length == span_length(n, ratio)
    expected = [token if view.start <= i < view.start + view.length else w for i, w in enumerate(words)]
    assert view.text == "".join(w + s for w, s in zip(expected, seps, strict=False))
    chars = mask_span(text, ratio, np.random.default_rng(seed), unit="chars", token=token)
    k = span_length(len(text), ratio)
    assert chars.text == text[: chars.start] + token * k + text[chars.start + k :]
    assert 0 <= chars.start <= len(text) - k


# ------------------------------------------------------------ votes near the range boundaries
@pytest.mark.parametrize("n", [3, 5, 16])
def test_votes_at_the_range_boundaries(n: int) -> None:
    assert parse_vote(f"\\boxed{{{n - 1}}}", n) == n - 1
    assert parse_vote("\\boxed{0}", n) == 0
    for bad in (f"\\boxed{{{n}}}", "\\boxed{-0}", "\\boxed{-1}", "\\boxed{+1}", "\\boxed{ }", "\\boxed{}"):
        got = parse_vote(bad, n)
        assert isinstance(got, Invalid), bad
    assert parse_vote(f"\\boxed{{{n}}}", n).reason == f"vote {n} is not a player index 0..{n - 1}"
    assert parse_vote(f"\\boxed{{Player {n - 1}}}", n) == n - 1
    assert parse_vote("\\boxed{p1}", n) == 1
    assert parse_vote("\\boxed{ $2$. }", n) == 2
    assert parse_vote("\\boxed{01}", n) == 1
    assert isinstance(parse_vote("\\boxed{X1}", n), Invalid) and isinstance(parse_vote("\\boxed{1X}", n), Invalid)


@pytest.mark.parametrize("digit", ["\uff11", "\u0661", "\u0967", "\U0001d7cf", "\u00b9"])
def test_non_ascii_digits_are_not_votes(digit: str) -> None:
    """The paper's format is ``\\boxed{k}`` with an index; other scripts' digits are Invalid."""
    assert isinstance(parse_vote(f"\\boxed{{{digit}}}", 5), Invalid)
    assert isinstance(parse_vote(f"I pick player {digit}", 5, lenient=True), Invalid)


@given(k=st.integers(-20, 40), n=st.integers(3, 16), form=st.sampled_from(["{}", " {} ", "${}$", "Player {}", "p{}"]))
def test_vote_is_its_index_exactly_when_in_range(k: int, n: int, form: str) -> None:
    got = parse_vote("thinking \\boxed{" + form.format(k) + "}", n)
    if 0 <= k < n:
        assert got == k
    else:
        assert isinstance(got, Invalid)


@pytest.mark.parametrize("form", ["N/A", "n/a", "NA", "none", "N.A.", "n / a", " N/A ", "$N/A$"])
def test_na_forms(form: str) -> None:
    assert parse_vote(f"\\boxed{{{form}}}", 4) == NA


def test_lenient_mentions_and_reasons() -> None:
    assert parse_vote("player #2 then N/A", 4, lenient=True) == NA
    assert parse_vote("N/A ... Player 3", 4, lenient=True) == 3
    assert parse_vote("nothing here", 4, lenient=True).reason == "no \\boxed{...} vote found"
    long = "\\boxed{" + "x" * 60 + "}"
    assert parse_vote(long, 4).reason == f"vote {('x' * 40)!r} is neither a player index nor N/A"


def test_parse_answer_markdown_and_case() -> None:
    assert parse_answer("> **ANSWER**: yes", True) == "yes"
    assert parse_answer("## answer:\nmulti\nline ", True) == "multi\nline"
    assert parse_answer("The answer: is inline", True) is None, "only a line that begins with Answer:"
    assert parse_answer("  \n ", False) is None


# ------------------------------------------------------------ god-detector mode
def god_game(votes: list[str], spy: int = 2, **cfg) -> SpyGame:
    env = SpyGame(n_players=4, detector="god", god_samples=3, **cfg)
    env.reset(seed=11, options={"spy": spy})
    for k in range(4):
        env.step(f"Answer: output of player {k}")
    assert env.phase.name == "vote" and env.agent_selection == "detector_0"
    for v in votes:
        env.step(v)
    return env


def test_god_detectors_see_the_full_source_and_every_output() -> None:
    env = SpyGame(n_players=4, detector="god", god_samples=3)
    env.reset(seed=11, options={"spy": 2})
    assert env.possible_agents == [*(f"player_{k}" for k in range(4)), "detector_0", "detector_1", "detector_2"]
    assert env.observe("player_2").view == env.masked.text != env.source.text
    for k in range(4):
        env.step(f"Answer: output of player {k}")
    assert env.pending_seats() == ["detector_0", "detector_1", "detector_2"], "players do not vote"
    obs = env.observe("detector_1")
    assert obs.role == "detector" and obs.view == env.source.text
    assert obs.outputs == tuple(f"output of player {k}" for k in range(4))


def test_god_mode_performing_rewards_come_from_the_detectors_votes() -> None:
    env = god_game(["\\boxed{2}", "\\boxed{2}", "\\boxed{0}"], spy=2, beta=0.3, **{"lambda": 0.05})
    assert env.done
    # m = [1, 0, 2, 0]: mc = 1/3, gap = 5/3, nc = 3
    expected = performing_rewards([1, 0, 2, 0], spy=2, beta=0.3, lam=0.05)
    got = [t.reward for t in env.turns if t.phase == "perform"]
    assert got == pytest.approx(expected)
    assert got[2] == pytest.approx(-0.5) and got[0] == pytest.approx(0.3 / 3 * 5 / 3 - 0.05 * 2 / 3)
    assert [t.reward for t in env.turns if t.phase == "vote"] == [1.0, 1.0, 0.0]
    ep = env.episode()
    assert ep.outcome["detector_0"].score == 1.0 and ep.outcome["detector_2"].score == 0.0
    assert ep.outcome["player_0"].score == 1.0 and ep.outcome["player_2"].score == 0.0, "the spy was caught"
    assert ep.metrics["detection_accuracy"] == pytest.approx(2 / 3)


def test_god_mode_shaped_rewards_per_detector() -> None:
    env = god_game(["\\boxed{2}", "\\boxed{N/A}", "garbage"], spy=2, detection_reward="shaped")
    assert [t.reward for t in env.turns if t.phase == "vote"] == pytest.approx([2.49, -0.5, -1.0])
    env = god_game(["\\boxed{1}", "\\boxed{3}", "\\boxed{3}"], spy=1, detection_reward="shaped")
    assert [t.reward for t in env.turns if t.phase == "vote"] == pytest.approx([2.49, -1.0, -1.0])
    # A detector is never "the spy", even with the spy's index: detector_1 voting 1 is just correct.
    ep = env.episode()
    assert ep.metrics["spy_caught"] == 0.0 and ep.metrics["na_rate"] == 0.0


def test_player_votes_shaped_for_the_spy_voter() -> None:
    env = SpyGame(n_players=3, detection_reward="shaped")
    env.reset(seed=2, options={"spy": 1})
    for k in range(3):
        env.step(f"Answer: a{k}")
    for v in ("\\boxed{1}", "\\boxed{N/A}", "\\boxed{0}"):
        env.step(v)
    # player_0 (civilian) correct 2.49; player_1 (spy) N/A +0.2; player_2 wrong -1.
    assert [t.reward for t in env.turns if t.phase == "vote"] == pytest.approx([2.49, 0.2, -1.0])


# ------------------------------------------------------------ retry mode
def test_retry_budget_runs_out_then_the_seat_abstains_with_penalties() -> None:
    env = SpyGame(n_players=3, invalid={"mode": "retry", "retries": 2, "penalty": -0.5})
    env.reset(seed=1, options={"spy": 0})
    for _ in range(3):
        assert env.agent_selection == "player_0"
        env.step("no answer line")
    assert env.agent_selection == "player_1", "after 1 + 2 attempts the seat moves on"
    assert [t.retried for t in env.turns] == [True, True, False]
    assert [t.valid for t in env.turns] == [False, False, False]
    assert [t.reward for t in env.turns] == [-0.5, -0.5, -0.5]
    assert env.infos["player_0"] == {"invalid": 3, "retries": 2}
    prompt = env.prompt("player_1")
    assert len(prompt) == 2, "another seat's prompt has no retry feedback"
    env.step("Answer: b")
    env.step("Answer: c")
    assert env.observe("player_1").outputs[0] == "(no answer)"
    assert env.infos["player_1"] == {"invalid": 0, "retries": 0}


def test_retry_feedback_names_each_failed_attempt() -> None:
    env = SpyGame(n_players=3, invalid={"mode": "retry", "retries": 3, "penalty": -0.25})
    env.reset(seed=1)
    env.step("first try")
    env.step("second try")
    prompt = env.prompt("player_0")
    assert [m["content"] for m in prompt[2:] if m["role"] == "assistant"] == ["first try", "second try"]
    assert prompt[-1]["content"].startswith("Your reply could not be used (no non-empty line starting with 'Answer:')")
    env.step("Answer: third time lucky")
    assert env.turns[-1].valid and env.turns[-1].action == "third time lucky"
    assert env.turns[-1].messages == prompt
    assert sum(t.reward for t in env.turns) == pytest.approx(-0.5)
    assert env.infos["player_0"] == {"invalid": 2, "retries": 2}


# ------------------------------------------------------------ shuffled outputs
def shuffled_seed(n: int) -> int:
    """The first seed whose display order is not the identity."""
    env = SpyGame(n_players=n, shuffle_outputs=True)
    for seed in range(100):
        env.reset(seed=seed)
        if list(env.display_order) != list(range(n)):
            return seed
    raise AssertionError("no seed shuffles the outputs")


def test_shuffled_outputs_keep_each_label_on_its_players_answer() -> None:
    env = SpyGame(n_players=5, shuffle_outputs=True)
    env.reset(seed=shuffled_seed(5))
    for k in range(5):
        env.step(f"Answer: the answer written by seat {k}")
    obs = env.observe("player_3")
    assert list(obs.output_players) != list(range(5)) and sorted(obs.output_players) == list(range(5))
    for k, text in zip(obs.output_players, obs.outputs, strict=True):
        assert text == f"the answer written by seat {k}"
    content = env.prompt("player_3")[-1]["content"]
    for k in range(5):
        assert f"Player {k}: the answer written by seat {k}" in content
    positions = [content.index(f"Player {k}:") for k in obs.output_players]
    assert positions == sorted(positions), "shown in the shuffled order"
