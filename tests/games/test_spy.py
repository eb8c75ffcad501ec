"""SpyRL: rules, rewards, parsing, and the env's invariants (the spec: arena/games/spy/__init__.py)."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.core.game import Invalid
from arena.testing import check_game, check_hidden_outputs, completions, play_texts
from arena.games.spy import SpyGame
from arena.games.spy.bots import BOTS
from arena.games.spy.rules import (
    NA,
    detection_reward_paper,
    detection_reward_shaped,
    mask_fact,
    mask_span,
    parse_answer,
    parse_vote,
    performing_rewards,
    split_units,
    span_length,
    vote_counts,
)
from tolerance import approx64

CONFIGS = [
    {},
    {"task": "math"},
    {"task": "story", "mask_unit": "chars", "n_players": 4},
    {"detector": "god", "god_samples": 3, "detection_reward": "shaped"},
    {"shuffle_outputs": True, "invalid": {"mode": "retry", "retries": 2, "penalty": -0.5}},
    {"invalid": {"mode": "penalty"}, "n_players": 3},
]


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_conformance_kit(overrides: dict) -> None:
    check_game(lambda: SpyGame(**overrides), bot=BOTS["default"])


# --------------------------------------------------------------- the draw
def test_exactly_one_spy_uniform_over_seeds() -> None:
    env = SpyGame(n_players=5)
    counts: Counter[int] = Counter()
    for seed in range(1000):
        env.reset(seed=seed)
        roles = [env.role(s) for s in env.players]
        assert roles.count("spy") == 1
        counts[roles.index("spy")] += 1
    # 1000 draws over 5 seats: each seat near 200; chi-square with 4 dof < 18.5 (p = 0.001).
    chi2 = sum((counts[i] - 200) ** 2 / 200 for i in range(5))
    assert chi2 < 18.5, counts


@given(seed=st.integers(0, 2**32 - 1), task=st.sampled_from(["summary", "story", "math"]),
       unit=st.sampled_from(["words", "chars"]), ratio=st.floats(0.05, 0.95))
def test_views_civilians_unchanged_spy_one_masked_span(seed: int, task: str, unit: str, ratio: float) -> None:
    env = SpyGame(task=task, mask_unit=unit, mask_ratio=ratio, mask_token="#")
    env.reset(seed=seed)
    source = env.source.text
    for seat in env.players:
        view = env.observe(seat).view
        if env.role(seat) == "civilian":
            assert view == source
            continue
        src_units, view_units = split_units(source, unit), split_units(view, unit)  # type: ignore[arg-type]
        assert len(src_units) == len(view_units)
        masked = [i for i, (a, b) in enumerate(zip(src_units, view_units)) if a != b or b == "#"]
        masked = [i for i in masked if view_units[i] == "#"]
        changed = [i for i, (a, b) in enumerate(zip(src_units, view_units)) if a != b]
        assert all(view_units[i] == "#" for i in changed), "only mask tokens may differ"
        info = env.episode_info()
        start, length = int(info["mask_start"]), int(info["mask_length"])  # type: ignore[arg-type]
        assert set(changed) <= set(range(start, start + length))
        assert all(view_units[i] == "#" for i in range(start, start + length))
        assert abs(length - ratio * len(src_units)) <= 1.0
        assert masked, "the spy must see a masked span"


# Texts that already hold the mask token are test_spy_values.py's case (the span is read from
# the view's start and length there); here a mask-token word can only come from the mask.
@given(text=st.text(min_size=1).filter(lambda t: t.strip() and "\x07" not in t), ratio=st.floats(0.01, 0.99),
       seed=st.integers(0, 2**31))
def test_mask_span_is_one_contiguous_run(text: str, ratio: float, seed: int) -> None:
    view = mask_span(text, ratio, np.random.default_rng(seed), "words", "\x07")
    src, out = split_units(text, "words"), split_units(view.text, "words")
    assert len(src) == len(out) == view.units
    runs = [i for i, w in enumerate(out) if w == "\x07"]
    assert runs == list(range(view.start, view.start + view.length))
    assert view.length == span_length(len(src), ratio)
    assert abs(view.length - ratio * len(src)) <= 1.0
    assert [w for i, w in enumerate(out) if i not in runs] == [w for i, w in enumerate(src) if i not in runs]


# --------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think it is 2.\n\\boxed{2}", 2),
        ("\\boxed{1} no wait \\boxed{3}", 3),
        ("\\boxed{N/A}", NA),
        ("\\boxed{ n/a }", NA),
        ("\\boxed{Player 4}", 4),
        ("\\boxed{$0$}", 0),
        ("\\boxed{5}", None),
        ("\\boxed{-1}", None),
        ("\\boxed{two}", None),
        ("no vote at all", None),
        ("\\boxed{2", None),
    ],
)
def test_parse_vote_examples(text: str, expected: object) -> None:
    got = parse_vote(text, 5)
    assert (None if isinstance(got, Invalid) else got) == expected


def test_lenient_votes_read_the_last_mention_only_when_asked() -> None:
    text = "Player 1 looks fine, but I think player 3 is the spy."
    assert isinstance(parse_vote(text, 5), Invalid)
    assert parse_vote(text, 5, lenient=True) == 3
    assert parse_vote("Hard to say: N/A", 5, lenient=True) == NA
    assert parse_vote("Player 2 ... \\boxed{0}", 5, lenient=True) == 0
    assert isinstance(parse_vote("player 9", 5, lenient=True), Invalid)


@given(text=completions(), n=st.integers(3, 16), lenient=st.booleans())
def test_parse_vote_never_raises_and_is_in_range(text: str, n: int, lenient: bool) -> None:
    got = parse_vote(text, n, lenient)
    assert isinstance(got, Invalid) or got == NA or (isinstance(got, int) and 0 <= got < n)


def test_parse_answer() -> None:
    assert parse_answer("thinking...\nAnswer: the gist", True) == "the gist"
    assert parse_answer("Answer: a\nmore\n**Answer:** b", True) == "b"
    assert parse_answer("just text", True) is None
    assert parse_answer("just text", False) == "just text"
    assert parse_answer("Answer:   ", True) is None


# --------------------------------------------------------------- rewards
votes_st = st.lists(st.one_of(st.integers(0, 7), st.just(NA), st.none()), min_size=1, max_size=12)


@given(votes=votes_st, spy=st.integers(0, 7), beta=st.floats(0, 10), lam=st.floats(0, 10))
def test_performing_rewards_sum_to_zero(votes: list, spy: int, beta: float, lam: float) -> None:
    counts = vote_counts(votes, 8)
    assert math.fsum(performing_rewards(counts, spy, beta, lam)) == approx64(0.0)


def test_performing_rewards_hand_computed() -> None:
    # n=4, spy=1, votes received m = [1, 2, 0, 1]: mc = (1+0+1)/3 = 2/3, gap = 4/3.
    r = performing_rewards([1, 2, 0, 1], spy=1, beta=0.1, lam=0.1)
    assert r[1] == pytest.approx(-0.1 * 4 / 3)
    assert r[0] == pytest.approx(0.1 / 3 * 4 / 3 - 0.1 * (1 - 2 / 3))
    assert r[2] == pytest.approx(0.1 / 3 * 4 / 3 - 0.1 * (0 - 2 / 3))


def test_vote_counts_ignore_na_and_invalid() -> None:
    assert vote_counts([0, 0, NA, None, 2], 3) == [2, 0, 1]


def test_shaped_detection_reward_table() -> None:
    assert detection_reward_shaped(2, spy=2, voter_is_spy=False, voter=None) == pytest.approx(2.49)
    assert detection_reward_shaped(1, spy=2, voter_is_spy=False, voter=None) == -1.0
    assert detection_reward_shaped(NA, spy=2, voter_is_spy=False, voter=None) == -0.5
    assert detection_reward_shaped(None, spy=2, voter_is_spy=False, voter=None) == -1.0
    assert detection_reward_shaped(2, spy=2, voter_is_spy=True, voter=2) == -1.0
    assert detection_reward_shaped(NA, spy=2, voter_is_spy=True, voter=2) == 0.2
    assert detection_reward_shaped(0, spy=2, voter_is_spy=True, voter=2) == 0.5
    assert detection_reward_shaped(None, spy=2, voter_is_spy=True, voter=2) == -1.0


@given(seed=st.integers(0, 10_000), votes=st.lists(st.one_of(completions(200), st.integers(-1, 6).map(lambda k: f"\\boxed{{{k}}}"), st.just("\\boxed{N/A}")), min_size=5, max_size=5))
def test_env_detection_reward_is_indicator_and_perform_sums_to_zero(seed: int, votes: list[str]) -> None:
    env = SpyGame(n_players=5)
    ep = play_texts(env, seed, ["Answer: x"] * 5 + votes)
    spy = int(str(ep.info["spy"]).rsplit("_", 1)[1])
    for turn in ep.turns_of(phase="vote"):
        parsed = parse_vote(turn.completion, 5)
        assert turn.reward == (1.0 if parsed == spy and not isinstance(parsed, Invalid) else 0.0)
    assert math.fsum(t.reward for t in ep.turns_of(phase="perform")) == approx64(0.0)


def test_detection_reward_paper_indicator() -> None:
    assert detection_reward_paper(3, 3) == 1.0
    assert detection_reward_paper(2, 3) == 0.0
    assert detection_reward_paper(NA, 3) == 0.0
    assert detection_reward_paper(None, 3) == 0.0


# --------------------------------------------------------------- env behaviour
@given(seed=st.integers(0, 10_000))
def test_no_output_visible_before_the_vote(seed: int) -> None:
    check_hidden_outputs(lambda: SpyGame(), seed)


def test_voters_see_answers_not_reasoning() -> None:
    env = SpyGame(n_players=3)
    env.reset(seed=4)
    for k in range(3):
        env.step(f"secret reasoning {k}\nAnswer: output {k}")
    obs = env.observe("player_0")
    assert obs.phase == "vote"
    assert obs.outputs == ("output 0", "output 1", "output 2")
    assert "secret reasoning" not in env.prompt("player_0")[-1]["content"]


def test_invalid_perform_shown_as_no_answer_and_penalised() -> None:
    env = SpyGame(n_players=3, invalid={"mode": "penalty", "penalty": -2.0})
    env.reset(seed=1)
    env.step("no answer line here")
    env.step("Answer: b")
    env.step("Answer: c")
    assert env.observe("player_1").outputs[0] == "(no answer)"
    assert env.turns[0].valid is False and env.turns[0].reward == -2.0
    assert env.infos["player_0"]["invalid"] == 1


def test_retry_mode_asks_again_then_accepts() -> None:
    env = SpyGame(n_players=3, invalid={"mode": "retry", "retries": 1, "penalty": -0.5})
    env.reset(seed=1)
    env.step("garbage")
    assert env.agent_selection == "player_0", "the seat is asked again"
    assert "could not be used" in env.prompt("player_0")[-1]["content"]
    env.step("Answer: fixed")
    assert env.agent_selection == "player_1"
    assert [t.retried for t in env.turns] == [True, False]
    assert env.turns[0].reward == -0.5 and env.turns[1].valid


def test_scripted_detectors_catch_a_careless_spy() -> None:
    from arena.runner import Runner
    from arena.policies.scripted import ScriptedPolicy

    def accuracy(bot: str) -> float:
        policy = ScriptedPolicy(BOTS[bot])
        episodes = Runner(lambda: SpyGame(n_players=5), {"bot": policy}, num_envs=4).play(list(range(40)))
        assert all(ep.metrics["parseable_vote_rate"] == 1.0 for ep in episodes)
        return float(np.mean([ep.metrics["detection_accuracy"] for ep in episodes]))

    # A spy that quotes its masked copy is caught by all 4 civilians (4/5 of the votes);
    # a copycat that drops the mask leaves nothing foreign in its answer.
    assert accuracy("extractive") == pytest.approx(0.8)
    assert accuracy("copycat") < 0.2


def test_math_metrics_use_the_checkable_answer() -> None:
    env = SpyGame(task="math", n_players=3)
    env.reset(seed=3)
    answer = env.source.answer
    ep = play_texts(env, 3, [f"Answer: so \\boxed{{{answer}}}"] * 3 + ["\\boxed{0}"] * 3)
    assert ep.metrics["civilian_correct"] == 1.0
    assert re.fullmatch(r"\d+", answer or "")


# ------------------------------------------------------------------ mask: fact (a variant, not the paper's)
WORDS = st.sampled_from(["the", "cat", "has", "apples,", "and", "B12", "3rd", "x", "said", "Tom"])
NUMBERS = st.sampled_from(["12", "7", "1,200", "3.50", "1990", "12."])


@given(parts=st.lists(st.one_of(WORDS, NUMBERS), min_size=1, max_size=30), seed=st.integers(0, 2**31))
def test_mask_fact_hides_one_number_everywhere_and_nothing_else(parts: list[str], seed: int) -> None:
    text = " ".join(parts)
    view = mask_fact(text, np.random.default_rng(seed), "#")
    numbers = [p.rstrip(".") for p in parts if p in ("12", "7", "1,200", "3.50", "1990", "12.")]
    if not numbers:  # no number: a name ("Tom" after a lowercase word) or None
        names = [b for a, b in zip(parts, parts[1:]) if b == "Tom" and a[-1].islower() or b == "Tom" and a[-1] == ","]
        assert (view is None) == (not names)
        if view is not None:
            assert view.text == " ".join("#" if (p == "Tom" and i > 0 and (parts[i - 1][-1].islower() or
                                                                        parts[i - 1][-1] == ",")) else p
                                         for i, p in enumerate(parts))
        return
    assert view is not None
    hidden = [p.rstrip(".") for p, q in zip(parts, view.text.split(" ")) if p != q]
    assert len(set(hidden)) == 1 and hidden[0] in numbers  # one fact
    assert view.length == numbers.count(hidden[0]) == len(hidden)  # every occurrence of it
    assert view.start == next(i for i, p in enumerate(parts) if p.rstrip(".") == hidden[0])
    assert view.units == len(parts)
    assert all(q == p or q == "#" + p[len(hidden[0]):] for p, q in zip(parts, view.text.split(" ")))


def test_mask_fact_draws_each_number_alike() -> None:
    text = "Maya buys 3 pens at 2 dollars, then 3 more; B12 and 3rd are not numbers."
    seen = Counter(mask_fact(text, np.random.default_rng(s)).text for s in range(400))  # type: ignore[union-attr]
    assert set(seen) == {"Maya buys * pens at 2 dollars, then * more; B12 and 3rd are not numbers.",
                         "Maya buys 3 pens at * dollars, then 3 more; B12 and 3rd are not numbers."}
    assert min(seen.values()) > 150


def test_the_fact_variant_tells_the_players_and_falls_back_to_a_span() -> None:
    game = SpyGame(task="math", mask="fact", n_players=3)
    game.reset(seed=3)
    info = game.episode_info()
    assert info["mask"] == "fact" and info["mask_length"] >= 1
    spy = f"player_{game.spy}"
    view = game.observe_seat(spy).view
    assert "*" in view and view != game.source.text
    text = " ".join(m["content"] for m in game.render_messages(game.observe_seat(spy)))
    assert "one fact (a number or a name)" in text and "contiguous" not in text
    plain = SpyGame(task="math", n_players=3)
    plain.reset(seed=3)
    assert plain.episode_info()["mask"] == "span"
    assert "contiguous" in " ".join(m["content"] for m in plain.render_messages(plain.observe_seat("player_0")))


def test_a_source_with_no_fact_gets_the_span(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "plain.jsonl"
    data.write_text('{"text": "the tide rises and falls twice a day as the moon pulls the water toward it"}\n')
    game = SpyGame(task="summary", mask="fact", data_path=str(data), n_players=3)
    game.reset(seed=0)
    info = game.episode_info()
    assert info["mask"] == "span" and info["mask_length"] == span_length(16, 0.2)
    assert "contiguous" in " ".join(m["content"] for m in game.render_messages(game.observe_seat("player_0")))


@pytest.mark.parametrize("key, value", [("mask_ratio", 0.3), ("mask_unit", "chars")])
def test_a_span_setting_with_the_fact_mask_is_refused(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{key}: {value!r} sizes a masked span"):
        SpyGame(mask="fact", **{key: value})
