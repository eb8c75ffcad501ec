"""train.stop_when's decision (arena/loop/components/stop.py, issue #34) against hand cases: pure, fast, no model, in
``make mutation``. The config errors and a run that stops: tests/test_stop_when.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from arena.loop.components.stop import StopRule, StopWatch, decide, evals_since_best

KEY = "eval/k/exploitability"
NAN = math.nan


def rule(**kw) -> StopRule:
    return StopRule.model_validate({"metric": "k/exploitability", **kw})


# ------------------------------------------------------------------ the decision (pure)
@pytest.mark.parametrize(("values", "mode", "delta", "since"), [
    ([], "min", 0.0, 0),
    ([0.5], "min", 0.0, 0),
    ([0.5, 0.4, 0.3], "min", 0.0, 0),
    ([0.5, 0.4, 0.4, 0.45], "min", 0.0, 2),        # a tie is no improvement
    ([0.5, 0.6, 0.7], "max", 0.0, 0),
    ([0.5, 0.6, 0.55, 0.6], "max", 0.0, 2),
    ([0.5, 0.46, 0.455], "min", 0.05, 2),          # neither is more than 0.05 below 0.5
    ([0.5, 0.449, 0.44], "min", 0.05, 1),
    ([NAN, 0.5, NAN, 0.6], "min", 0.0, 2),         # NaN never improves; the first real value is the first best
    ([0.3, NAN, NAN], "max", 0.0, 2),
    ([0.5, 0.54, 0.56], "max", 0.05, 0),           # 0.56 beats 0.5 by more than 0.05; 0.54 does not
    ([0.5, 0.56, 0.6], "max", 0.05, 1),            # 0.6 does not beat 0.56 by more than 0.05
    ([0.5, 0.46], "max", 0.05, 1),
])
def test_evals_since_best(values, mode, delta, since) -> None:
    assert evals_since_best(values, mode, delta) == since
    if delta == 0.0:
        assert evals_since_best(values, mode) == since  # min_delta defaults to 0


@pytest.mark.parametrize(("rules", "values", "fires"), [
    ([{"<=": 0.05}], [0.4, 0.06], None),
    ([{"<=": 0.05}], [0.4, 0.05], 0),                # at the threshold: stops
    ([{"<=": 0.05}], [0.04, 0.06], None),            # the latest value counts
    ([{">=": 0.9}], [0.5, 0.9], 0),
    ([{">=": 0.9}], [0.5, 0.89], None),
    ([{"patience": 2, "mode": "min"}], [0.5, 0.4, 0.41], None),
    ([{"patience": 2, "mode": "min"}], [0.5, 0.4, 0.41, 0.4], 0),
    ([{"patience": 2, "mode": "max"}], [0.5, 0.4, 0.41, 0.6], None),
    ([{"patience": 1, "mode": "min", "min_delta": 0.1}], [0.5, 0.45], 0),
    ([{"<=": 0.01}, {"patience": 1, "mode": "min"}], [0.5, 0.5], 1),  # the rule that fires is named
    ([{"<=": 0.6}, {"patience": 1, "mode": "min"}], [0.5, 0.5], 0),   # the first that fires wins
    ([{"<=": 0.05}], [], None),                      # nothing logged yet
])
def test_decide_by_hand(rules, values, fires) -> None:
    stop = decide([rule(**r) for r in rules], {KEY: values})
    assert (stop.rule if stop else None) == fires
    if stop is not None:
        assert stop.metric == "k/exploitability" and stop.value == values[-1]
        assert f"train.stop_when.{fires}" in stop.reason


def test_a_rule_with_nothing_logged_yet_does_not_hide_the_next() -> None:
    other = StopRule.model_validate({"metric": "k/nash_conv", "<=": 1.0})
    assert decide([other, rule(patience=1, mode="max")], {KEY: [0.5, 0.4]}).rule == 1
    assert decide([rule(**{">=": 0.6}), rule(patience=1, mode="max")], {KEY: [0.5, 0.4]}).rule == 1


def test_reasons_say_what_crossed() -> None:
    assert decide([rule(**{"<=": 0.05})], {KEY: [0.04]}).reason == \
        "k/exploitability = 0.04 <= 0.05 (train.stop_when.0)"
    assert decide([rule(patience=2, mode="min")], {KEY: [0.3, 0.2, 0.25, 0.21]}).reason == \
        "k/exploitability: no new best (min) in 2 evaluations; best 0.2, last 0.21 (train.stop_when.0)"


def test_the_watch_reads_rows_and_a_resumed_runs_metrics(tmp_path: Path) -> None:
    rules = [rule(patience=2, mode="min")]
    watch = StopWatch(rules)
    assert watch.update({"step": 1, "loss": 1.0}) is None and watch.history[KEY] == []  # no eval in the row
    assert watch.update({"step": 0, KEY: 0.3}) is None
    assert watch.update({"step": 2, KEY: 0.31}) is None
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"step": 0, KEY: 0.3}) + '\n{"step": 1, "eval/k/ex\n'  # a line cut short
                       + json.dumps({"step": 2, KEY: 0.31}) + '\n{"step": 3, "eval/k/expl')     # (a kill mid-write)
    resumed = StopWatch(rules, metrics)
    assert resumed.history[KEY] == [0.3, 0.31]
    assert resumed.update({"step": 4, KEY: None}).rule == 0  # logged as null (NaN): no improvement


def test_the_reason_names_the_best_that_counted() -> None:
    """With min_delta, the best is the last value that beat the one before by more than min_delta."""
    stop = decide([rule(patience=2, mode="min", min_delta=0.05)], {KEY: [0.5, 0.46, 0.455]})
    assert stop is not None and "best 0.5, last 0.455" in stop.reason
