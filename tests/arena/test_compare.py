"""arena.rank.compare: pooled ratios against chance and paired comparisons (pure, plus the eval CLI on bots)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from arena.core.types import Episode
from arena.rank.compare import chance_value, evaluate, paired_summary, ratio_summary, terms
from arena.rank.eval import main as eval_main

ROOT = Path(__file__).resolve().parents[2]


class Votes:
    eval_ratios = {"named": ("detection_accuracy", "parseable_vote_rate - na_rate", "1/n")}


def ep(seed: int, acc: float, parse: float, na: float) -> Episode:
    return Episode(episode_id=str(seed), game="g", seed=seed,
                   metrics={"detection_accuracy": acc, "parseable_vote_rate": parse, "na_rate": na})


def test_terms_and_evaluate():
    assert terms("a - b+c") == [(1.0, "a"), (-1.0, "b"), (1.0, "c")]
    assert evaluate("a - b", {"a": 0.5, "b": 0.25}) == 0.25
    assert evaluate("a - zz", {"a": 1.0}) is None
    assert chance_value("1/n", type("C", (), {"n": 4})()) == 0.25 and chance_value(0.5, None) == 0.5


def test_ratio_is_pooled_over_games_not_a_mean_of_per_game_ratios():
    # game 1: 1 correct of 4 named votes; game 2: 1 correct of 1 named vote (3 N/A) -> 2/5, not (0.25+1)/2
    eps = [ep(0, 0.25, 1.0, 0.0), ep(1, 0.25, 1.0, 0.75)]
    out = ratio_summary(Votes, type("C", (), {"n": 4})(), eps)["ratio/named"]
    assert out["mean"] == pytest.approx(0.4) and out["n"] == pytest.approx(1.25) and out["chance"] == 0.25
    assert out["low"] <= 0.4 <= out["high"]


def test_paired_difference_and_its_interval():
    rng = np.random.default_rng(0)
    base = rng.random(64)
    a = [ep(i, float(x), 1.0, 0.0) for i, x in enumerate(np.clip(base + 0.1, 0, 1))]
    b = [ep(i, float(x), 1.0, 0.0) for i, x in enumerate(base)]
    out = paired_summary(a, b, Votes)
    d = out["game/detection_accuracy"]
    assert d["diff"] == pytest.approx(np.mean([x.metrics["detection_accuracy"] for x in a]) - base.mean())
    # the games vary a lot, the pairs barely: the paired interval is far tighter than the spread of the games
    assert d["low"] > 0.05 and d["high"] - d["low"] < 0.05
    assert out["ratio/named"]["diff"] == pytest.approx(d["diff"])
    with pytest.raises(ValueError, match="same games"):
        paired_summary(a, b[::-1], Votes)


def test_eval_compare_set_on_spy_bots(tmp_path: Path, capsys):
    out = tmp_path / "eval.json"
    code = eval_main([str(ROOT / "arena/games/spy/spy.yaml"), "--set", "seats={'*': 'scripted:extractive'}", "--set",
                      "game.n_players=4", "--set", "runner.progress=false", "--games", "8", "--json", str(out),
                      "--compare-set", "seats={'*': 'scripted:fixed_vote:1'}"])
    assert code == 0
    data = json.loads(out.read_text())
    named = data["ratios"]["ratio/named_vote_accuracy"]
    assert named["chance"] == 0.25 and 0.0 <= named["mean"] <= 1.0
    paired = data["paired"]["ratio/named_vote_accuracy"]
    assert paired["diff"] == pytest.approx(paired["a"] - paired["b"]) and paired["low"] <= paired["diff"] <= paired["high"]
    assert "paired comparison on the same games" in capsys.readouterr().out
