"""The estimator registry: names, options, hand-computed advantages, RAE state and metrics."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from pydantic import BaseModel, ConfigDict, ValidationError

from arena.core.types import Episode
from arena.learners.config import EstimatorConfig, LearnerConfig
from arena.learners.estimators import (
    ESTIMATORS,
    EstimatorInput,
    EstimatorOutput,
    EstimatorStates,
    RaeOptions,
    get_estimator,
    register_estimator,
)
from tolerance import approx32

KNOWN = "auso, dr_grpo, grpo, lsp_challenger, lsp_solver, rae, skill_sp_curriculum"


def make_input(rewards: list[float], episodes: list[int], roles: list[str] | None = None, drop: bool = False) -> EstimatorInput:
    keys = [{"episode": f"e{g}", "phase": "p"} for g in episodes]
    return EstimatorInput(
        rewards=torch.tensor(rewards, dtype=torch.float64), keys=keys, roles=roles or ["r"] * len(rewards),
        games=torch.tensor(episodes), turns=[], episodes=[], group_by=["episode", "phase"], drop_zero_variance=drop,
    )


def run(name: str, inp: EstimatorInput, state: dict | None = None, **options: object) -> EstimatorOutput:
    spec = get_estimator(name)
    return spec.fn(inp, spec.options.model_validate(options), {} if state is None else state)


def test_unknown_estimator_lists_the_known_names() -> None:
    # Estimators may be registered from outside learners/ (a test, a plug-in),
    # so the listed names are the built-ins plus whatever is registered by now.
    assert set(KNOWN.split(", ")) <= set(ESTIMATORS)
    known = ", ".join(sorted(ESTIMATORS))
    with pytest.raises(ValueError, match=f"unknown estimator 'gpro'; known: {known}$"):
        get_estimator("gpro")
    with pytest.raises(ValidationError, match=f"unknown estimator 'gpro'; known: {known}"):
        LearnerConfig(estimators={"vote": {"name": "gpro"}})


def test_options_are_validated_by_the_estimators_model_and_name_the_option() -> None:
    with pytest.raises(ValidationError, match=r"rae: unknown option 'ordr' \(known: order, alpha\)"):
        EstimatorConfig(name="rae", options={"ordr": "code"})
    with pytest.raises(ValidationError, match=r"rae option alpha=1.5: Input should be less than 1"):
        EstimatorConfig(name="rae", options={"alpha": 1.5})
    with pytest.raises(ValidationError, match=r"grpo: unknown option 'alpha' \(known: none\)"):
        EstimatorConfig(name="grpo", options={"alpha": 0.9})
    cfg = EstimatorConfig(name="rae", options={"order": "code"})
    assert cfg.options == {"order": "code", "alpha": 0.9}, "defaults are filled in (the resolved config shows them)"
    assert cfg.parsed_options() == RaeOptions(order="code", alpha=0.9)


def test_learner_config_has_no_built_in_phases() -> None:
    cfg = LearnerConfig()
    assert cfg.estimators == {} and cfg.objectives == [] and cfg.reference == "auto"
    with pytest.raises(ValidationError):
        LearnerConfig(rae={"order": "code"})  # type: ignore[call-arg]  # now options of the rae estimator


def test_grpo_and_dr_grpo_by_group() -> None:
    # episode 0: 1, 0 (mean 0.5, std 0.5); episode 1: 2, 2, 5 (mean 3, std sqrt 2); episode 2: 4, 4 (no variance)
    inp = make_input([1, 0, 2, 2, 5, 4, 4], [0, 0, 1, 1, 1, 2, 2])
    s = 2**0.5
    out = run("grpo", inp)
    assert out.advantages.tolist() == approx32([1, -1, -1 / s, -1 / s, 2 / s, 0, 0])
    assert out.keep.all(), "drop_zero_variance off keeps every turn"
    dr = run("dr_grpo", make_input([1, 0, 2, 2, 5, 4, 4], [0, 0, 1, 1, 1, 2, 2], drop=True))
    assert dr.advantages.tolist() == pytest.approx([0.5, -0.5, -1, -1, 2, 0, 0])
    assert dr.keep.tolist() == [True] * 5 + [False, False]
    assert dr.advantages.dtype == torch.float64


def test_lsp_solver_subtracts_the_query_value() -> None:
    # query (episode) 0: answers 1, 3 -> V 2; query 1: 0, 0, 6 -> V 2; query 2: 1, 1 -> no signal
    out = run("lsp_solver", make_input([1, 3, 0, 0, 6, 1, 1], [0, 0, 1, 1, 1, 2, 2], drop=True))
    assert out.advantages.tolist() == pytest.approx([-1, 1, -2, -2, 4, 0, 0])
    assert out.keep.tolist() == [True] * 5 + [False, False]


def test_lsp_challenger_is_reward_minus_the_mean_over_all_turns() -> None:
    # challenger turns credited -V(q) for V = 2, 5, 8 (one per episode); no std
    out = run("lsp_challenger", make_input([-2, -5, -8], [0, 1, 2], drop=True))
    assert out.advantages.tolist() == pytest.approx([3, 0, -3]) and out.keep.all()
    flat = run("lsp_challenger", make_input([-1, -1], [0, 1], drop=True))
    assert not flat.keep.any(), "all challengers equal: no signal"
    assert run("lsp_challenger", make_input([-1, -1], [0, 1], drop=False)).keep.all()


def test_stream_curriculum_trains_only_the_top_task_of_each_stream() -> None:
    # tasks (episodes): lane a scored 0.9, 0.3; lane b 0.1, 0.5; lane c 1.0 (no quota: never chosen).
    # tasks=2, alpha=0.5: the best of a (episode 0) and the best of b (episode 3).
    lanes, scores = ["a", "a", "b", "b", "c"], [0.9, 0.3, 0.1, 0.5, 1.0]
    episodes = [Episode(episode_id=f"e{g}", game="g", info={"lane": lane}, rewards={"writer": r, "solver": 7.0})
                for g, (lane, r) in enumerate(zip(lanes, scores, strict=True))]  # fmt: skip
    rewards, games = [1, 0, 1, 0, 1, 0, 3, 3, 1, 0], [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    opts = {"tasks": 2, "alpha": 0.5, "stream_key": "lane", "streams": ("a", "b"), "rank_by": "writer"}
    for drop in (False, True):
        out = run("skill_sp_curriculum", replace(make_input(rewards, games, drop=drop), episodes=episodes), **opts)
        assert out.advantages.tolist() == approx32([1, -1] + [0] * 8)
        assert out.keep.tolist() == [True, True] + [False] * 4 + [not drop] * 2 + [False] * 2
    # alpha=1.0: the whole quota goes to lane a, both of whose tasks are trained
    both_a = run("skill_sp_curriculum", replace(make_input(rewards, games), episodes=episodes), **opts | {"alpha": 1.0})
    assert both_a.keep.tolist() == [True] * 4 + [False] * 6
    # the defaults read Skill-SP's episodes: info["stream"] in skill/exploration, ranked by the proposer
    assert get_estimator("skill_sp_curriculum").options().model_dump() == {
        "tasks": 8, "alpha": 0.5, "fill": False, "stream_key": "stream", "streams": ("skill", "exploration"),
        "rank_by": "proposer",
    }


def test_rae_keeps_role_baselines_in_the_state() -> None:
    inp = make_input([-0.2, 0.1, 0.3, 0.4, -0.2, 0.0], [0, 0, 0, 1, 1, 1], ["spy", "civ", "civ"] * 2)
    state: dict = {}
    out = run("rae", inp, state, alpha=0.75)
    assert out.advantages.tolist() == pytest.approx([-0.2, 0.1, 0.3, 0.45, -0.25, -0.05])
    assert state["values"] == pytest.approx({"spy": 0.75 * -0.05 + 0.25 * 0.4, "civ": 0.75 * 0.05 + 0.25 * -0.1})
    again = run("rae", make_input([0.4], [0], ["spy"]), state, alpha=0.75)  # reads b_spy = 0.0625
    assert again.advantages.tolist() == pytest.approx([0.4 - 0.0625])


def test_rae_state_round_trip_resumes_exactly() -> None:
    cfgs = {"perform": EstimatorConfig(name="rae", options={"order": "code", "alpha": 0.8})}
    batches = [make_input([-0.3, 0.1, 0.2], [0, 0, 0], ["spy", "civ", "civ"]) for _ in range(3)]
    straight = EstimatorStates(cfgs)
    outs = [run("rae", b, straight.for_phase("perform"), order="code", alpha=0.8).advantages for b in batches]
    resumed = EstimatorStates(cfgs)
    run("rae", batches[0], resumed.for_phase("perform"), order="code", alpha=0.8)
    restored = EstimatorStates(cfgs)
    restored.load_state_dict(json.loads(json.dumps(resumed.state_dict())))
    rest = [run("rae", b, restored.for_phase("perform"), order="code", alpha=0.8).advantages for b in batches[1:]]
    assert all(torch.equal(a, b) for a, b in zip(outs[1:], rest, strict=True))
    assert restored.state_dict() == straight.state_dict()


def test_state_metrics_are_named_by_estimator_and_phase_when_ambiguous() -> None:
    one = EstimatorStates({"perform": EstimatorConfig(name="rae"), "vote": EstimatorConfig(name="grpo")})
    one.for_phase("perform")["values"] = {"spy": -0.25, "civilian": 0.5}
    one.for_phase("vote")
    assert one.metrics() == {"rae/spy": -0.25, "rae/civilian": 0.5}
    two = EstimatorStates({"a": EstimatorConfig(name="rae"), "b": EstimatorConfig(name="rae")})
    two.for_phase("a")["values"] = {"spy": 1.0}
    two.for_phase("b")["values"] = {"spy": 2.0}
    assert two.metrics() == {"rae/a/spy": 1.0, "rae/b/spy": 2.0}


def test_a_registered_estimator_is_selectable_with_its_options() -> None:
    class ShiftOptions(BaseModel):
        model_config = ConfigDict(extra="forbid")
        shift: float = 0.0

    @register_estimator("test_shift", options=ShiftOptions)
    def shift(inp: EstimatorInput, options: ShiftOptions, state: dict) -> EstimatorOutput:
        state["calls"] = state.get("calls", 0) + 1
        return EstimatorOutput(inp.rewards - options.shift, torch.ones_like(inp.rewards, dtype=torch.bool))

    try:
        cfg = EstimatorConfig(name="test_shift", options={"shift": 0.25})
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("test_shift")(shift)
        state: dict = {}
        out = get_estimator(cfg.name).fn(make_input([1.0, 0.5], [0, 0]), cfg.parsed_options(), state)
        assert out.advantages.tolist() == [0.75, 0.25] and state == {"calls": 1}
    finally:
        ESTIMATORS.pop("test_shift")
