"""Stage schedule rules on scripted metric sequences, their state round trip and config errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from arena.learners.progress import Progress
from arena.learners.schedule import Schedule, ScheduleConfig, make_schedule, schedule_phases

ADAPTER: TypeAdapter[Any] = TypeAdapter(ScheduleConfig)


def build(raw: dict[str, Any], default: list[str] | None = None) -> Schedule:
    return make_schedule(ADAPTER.validate_python(raw), default or [])


def run(schedule: Schedule, metrics: list[dict[str, float]], total: int | None = None) -> list[list[str]]:
    """The phases of each step, feeding ``metrics[i]`` after step i."""
    out = []
    for i, m in enumerate(metrics):
        out.append(schedule.phases(Progress(i + 1, total) if total else None))
        schedule.update(m)
    return out


def resumed(raw: dict[str, Any], metrics: list[dict[str, float]], cut: int) -> list[list[str]]:
    """The same run, checkpointed (through JSON) after ``cut`` steps and resumed in a new schedule."""
    first = build(raw)
    head = run(first, metrics[:cut])
    second = build(raw)
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    return head + run(second, metrics[cut:])


def test_progress_fraction() -> None:
    assert [Progress(s, 5).fraction for s in range(1, 6)] == [0, 0.25, 0.5, 0.75, 1]
    assert Progress(1, 1).fraction == 1.0 and Progress(9, 5).fraction == 1.0
    with pytest.raises(ValueError, match="step >= 1"):
        Progress(0, 5)


def test_joint_trains_every_estimated_phase_or_its_one_stage() -> None:
    assert build({}, ["perform", "vote", "perform"]).phases() == ["perform", "vote"]
    s = build({"rule": "joint", "stages": [["b", "a", "b"]]}, ["x"])
    assert run(s, [{}] * 3) == [["b", "a"]] * 3 and s.state_dict() == {"stage": 0, "steps_in_stage": 3}
    with pytest.raises(ValidationError, match="at most 1 item"):
        ADAPTER.validate_python({"rule": "joint", "stages": [["a"], ["b"]]})


def test_cycle_moves_on_every_n_steps_and_wraps() -> None:
    raw = {"rule": "cycle", "stages": [["a"], ["b", "c"], ["d"]], "every": 2}
    expected = [["a"], ["a"], ["b", "c"], ["b", "c"], ["d"], ["d"], ["a"]]
    assert run(build(raw), [{}] * 7) == expected
    assert resumed(raw, [{}] * 7, 3) == expected, "a resume mid-stage keeps the stage and its count"


def old_fixed(n: int) -> list[str]:
    """The old ``mode: fixed, every: 1``: start on detection (vote), switch after every step."""
    stage, out = "vote", []
    for _ in range(n):
        out.append(stage)
        stage = "perform" if stage == "vote" else "vote"
    return out


def test_cycle_reproduces_the_old_fixed_mode() -> None:
    s = build({"rule": "cycle", "stages": [["vote"], ["perform"]], "every": 1})
    assert [p for (p,) in run(s, [{}] * 6)] == old_fixed(6)


PAPER = {
    "rule": "hysteresis", "min_steps": 2, "ema": 0.5,
    "stages": [
        {"phases": ["vote"], "leave_when": {"all": [["acc", ">=", 0.9], ["na", "<=", 0.1]]}},
        {"phases": ["perform"], "leave_when": {"any": ["acc <= 0.6", "na >= 0.5"]}},
    ],
}


def test_hysteresis_thresholds_ema_min_steps_both_ways() -> None:
    s = build(PAPER)
    m = [
        {"acc": 1.0, "na": 0.0},  # 1 vote: EMA acc 1, na 0; holds but only 1 step in stage
        {"acc": 0.7, "na": 0.0},  # 2 vote: EMA acc 0.85 < 0.9: stays
        {"acc": 1.0, "na": 0.3},  # 3 vote: acc 0.925, na 0.15 > 0.1: stays
        {"acc": 1.0, "na": 0.0},  # 4 vote: acc 0.9625, na 0.075: leaves -> perform
        {"acc": 0.0, "na": 0.0},  # 5 perform: acc 0.48125 <= 0.6 holds, but 1 step < min_steps
        {"acc": 1.0, "na": 0.0},  # 6 perform: acc 0.740625, na 0.0375: neither fires
        {"acc": 0.2, "na": 0.0},  # 7 perform: acc 0.4703 <= 0.6: leaves -> vote
        {"acc": 1.0, "na": 0.0},  # 8 vote
    ]
    assert [p for (p,) in run(s, m)] == ["vote"] * 4 + ["perform"] * 3 + ["vote"]
    assert s.state_dict() == {"stage": 0, "steps_in_stage": 1, "ema": pytest.approx({"acc": 0.73515625, "na": 0.0046875})}
    assert resumed(PAPER, m, 5) == run(build(PAPER), m)


def test_hysteresis_any_fires_on_one_metric_and_unseen_metrics_never_fire() -> None:
    raw = {"rule": "hysteresis", "min_steps": 1, "ema": 0.0,
           "stages": [{"phases": ["p"], "leave_when": {"any": ["x > 1", "y < 0"]}}, {"phases": ["q"]}]}
    s = build(raw)
    assert run(s, [{}, {"z": 5.0}, {"x": 1.0}, {"y": -1.0}, {"x": 9.0}]) == [["p"]] * 4 + [["q"]]
    assert s.phases() == ["q"], "a stage without leave_when is never left"
    strict = build({"rule": "hysteresis", "min_steps": 1,
                    "stages": [{"phases": ["p"], "leave_when": {"all": ["x >= 0", "y >= 0"]}}, {"phases": ["q"]}]})
    assert run(strict, [{"x": 1.0}] * 3) == [["p"]] * 3, "all: a metric never seen keeps the stage"


def reference_old_hysteresis(metrics: list[dict[str, float]]) -> list[str]:
    """The old ``mode: hysteresis`` with its paper defaults, written out."""
    stage, steps, acc, na, out = "vote", 0, None, None, []
    for m in metrics:
        out.append(stage)
        steps += 1
        acc = m["detection_accuracy"] if acc is None else 0.9 * acc + 0.1 * m["detection_accuracy"]
        na = m["na_rate"] if na is None else 0.9 * na + 0.1 * m["na_rate"]
        if steps >= 5 and stage == "vote" and acc >= 0.9 and na <= 0.1:
            stage, steps = "perform", 0
        elif steps >= 5 and stage == "perform" and (1 - acc >= 0.4 or na >= 0.5):
            stage, steps = "vote", 0
    return out


def test_hysteresis_expresses_spyrl_paper_rule() -> None:
    raw = {"rule": "hysteresis", "stages": [
        {"phases": ["vote"], "leave_when": {"all": ["detection_accuracy >= 0.9", "na_rate <= 0.1"]}},
        {"phases": ["perform"], "leave_when": {"any": ["detection_accuracy <= 0.6", "na_rate >= 0.5"]}},
    ]}
    accs = [0.95] * 12 + [0.2] * 12 + [1.0] * 16 + [0.5] * 10
    nas = [0.02] * 30 + [0.9] * 20
    metrics = [{"detection_accuracy": a, "na_rate": n} for a, n in zip(accs, nas, strict=True)]
    got = [p for (p,) in run(build(raw), metrics)]
    assert got == reference_old_hysteresis(metrics) and "perform" in got and got.count("vote") > 5


def test_progress_splits_training_2_5_3() -> None:
    raw = {"rule": "progress", "stages": [["warm"], ["rl", "distill"], ["rl"]], "boundaries": [0.2, 0.7]}
    got = run(build(raw), [{}] * 10, total=10)
    assert got == [["warm"]] * 2 + [["rl", "distill"]] * 5 + [["rl"]] * 3
    with pytest.raises(ValueError, match="needs the training progress"):
        build(raw).phases()


@pytest.mark.parametrize(
    ("raw", "loc", "message"),
    [
        ({"rule": "cycle", "stages": [["a"]], "every": 0}, ("cycle", "every"), "greater than or equal to 1"),
        ({"rule": "cycle", "stages": [["a"]], "evry": 2}, ("cycle", "evry"), "Extra inputs"),
        ({"rule": "cycle", "stages": []}, ("cycle", "stages"), "at least 1 item"),
        ({"rule": "cycl"}, (), "unknown schedule rule; known: joint, cycle, hysteresis, progress"),
        ({"rule": "progress", "stages": [["a"], ["b"]], "boundaries": [0.5, 0.6]}, ("progress",), "need 1"),
        ({"rule": "progress", "stages": [["a"], ["b"], ["c"]], "boundaries": [0.7, 0.2]}, ("progress",), "increase"),
        ({"rule": "hysteresis", "stages": [{"phases": ["a"], "leave_when": {}}]},
         ("hysteresis", "stages", 0, "leave_when"), "exactly one of 'all' or 'any'"),
        ({"rule": "hysteresis", "stages": [{"phases": ["a"], "leave_when": {"any": [["x", "=>", 1]]}}]},
         ("hysteresis", "stages", 0, "leave_when", "any", 0, 1), "Input should be '>=', '<=', '>' or '<'"),
        ({"rule": "hysteresis", "stages": [{"phases": ["a"]}], "ema": 1.0}, ("hysteresis", "ema"), "less than 1"),
    ],
)
def test_config_errors_name_the_field(raw: dict[str, Any], loc: tuple, message: str) -> None:
    class Train(BaseModel):
        schedule: ScheduleConfig = Field(default=None)  # type: ignore[assignment]

    with pytest.raises(ValidationError) as info:
        Train.model_validate({"schedule": raw})
    err = info.value.errors()[0]
    assert err["loc"] == ("schedule", *loc) and message in err["msg"]


def test_schedule_phases_lists_every_named_phase() -> None:
    assert schedule_phases(ADAPTER.validate_python({})) == set()
    assert schedule_phases(ADAPTER.validate_python({"rule": "cycle", "stages": [["a"], ["b", "c"]]})) == {"a", "b", "c"}
    assert schedule_phases(ADAPTER.validate_python(PAPER)) == {"vote", "perform"}
    dumped = ADAPTER.dump_python(ADAPTER.validate_python(PAPER), mode="json")
    assert ADAPTER.validate_python(json.loads(json.dumps(dumped))) == ADAPTER.validate_python(PAPER)
