"""Learner maths on small hand-computed batches with asymmetric parameters: sample building
(trainable-turn filter, grpo vs dr_grpo, zero-variance dropping, RAE wiring with alpha != 0.5),
clip_low != clip_high with the upper clip binding, aggregation and KL values."""

from __future__ import annotations

import math

import pytest
import torch

from arena.core.types import Episode, Turn
from arena.learners.advantages import group_index, group_mean_std, grpo, role_advantages, zero_variance
from arena.learners.config import LearnerConfig
from arena.learners.estimators import (
    ESTIMATORS, EstimatorInput, EstimatorOutput, EstimatorStates, get_estimator, register_estimator,
)
from arena.learners.losses import aggregate, aggregation_weights, clipped_surrogate, kl_penalty, reinforce_detached
from arena.learners.samples import build_samples, credited_rewards, trainable_turns
from tolerance import approx32

R2 = math.sqrt(2)


def turn(i: int, seat: str, role: str, phase: str, reward: float, ep: str, policy: str = "learner", ids=(5, 6)) -> Turn:
    return Turn(
        index=i, seat=seat, role=role, phase=phase, messages=[], completion="x", reward=reward, policy=policy,
        group={"episode": ep, "phase": phase, "role": role}, prompt_ids=[1, i], completion_ids=list(ids),
        logprobs=[-0.5] * len(ids), finish_reason="stop",
    )


def batch() -> list[Episode]:
    """Two games of 3 seats (a, b, c; b is the spy), a perform then a vote turn each.

    ep0 votes: 1, 0, 0 plus a scripted seat d voting 1 and a learner turn without tokens;
    ep1 votes: 1, 1, 1 (no variance). Perform rewards: ep0 civ 0.1, spy -0.3, civ 0.2;
    ep1 civ -0.1, spy 0.5, civ -0.3.
    """
    eps = []
    for e, (votes, perf) in enumerate([((1.0, 0.0, 0.0), (0.1, -0.3, 0.2)), ((1.0, 1.0, 1.0), (-0.1, 0.5, -0.3))]):
        eid = f"ep{e}"
        turns = []
        for s, role, r in zip("abc", ("civilian", "spy", "civilian"), perf, strict=True):
            turns.append(turn(len(turns), s, role, "perform", r, eid))
        for s, role, r in zip("abc", ("civilian", "spy", "civilian"), votes, strict=True):
            turns.append(turn(len(turns), s, role, "vote", r, eid))
        if e == 0:
            turns.append(turn(len(turns), "d", "civilian", "vote", 1.0, eid, policy="bot"))
            turns.append(turn(len(turns), "a", "civilian", "vote", 1.0, eid, ids=()))
        rewards = {s: sum(t.reward for t in turns if t.seat == s) for s in "abcd"}
        eps.append(Episode(episode_id=eid, game="g_v0", turns=turns, rewards=rewards, roles={}))
    return eps


def run(estimators: dict, phases=("vote",), drop: bool = True, states: EstimatorStates | None = None):
    cfg = LearnerConfig(drop_zero_variance=drop, estimators=estimators)
    states = states or EstimatorStates(cfg.estimators)
    samples, stats = build_samples(batch(), list(phases), cfg, states, "learner")
    return samples, stats, states


def test_trainable_turn_filter() -> None:
    turns, games = trainable_turns(batch(), "vote", "learner")
    assert [(t.seat, t.phase) for t in turns] == [("a", "vote"), ("b", "vote"), ("c", "vote")] * 2
    assert games == [0, 0, 0, 1, 1, 1], "scripted seat d and the turn without tokens are left out"
    assert trainable_turns(batch(), "vote", "bot")[0][0].seat == "d"
    assert trainable_turns(batch(), "nothing", "learner") == ([], [])


def test_grpo_vs_dr_grpo_scaling_and_zero_variance_dropping() -> None:
    by_ep = {"name": "grpo", "group_by": ["episode"]}
    samples, stats, _ = run({"vote": by_ep})
    # ep0 rewards 1, 0, 0: mean 1/3, population std sqrt(2)/3 -> (2/3)/(sqrt2/3) = sqrt2, -1/sqrt2
    assert [s.advantage for s in samples] == approx32([R2, -1 / R2, -1 / R2])
    assert stats == {"vote/turns": 6.0, "vote/dropped": 3.0, "vote/reward_mean": pytest.approx(4 / 6)}
    dr, dr_stats, _ = run({"vote": by_ep | {"name": "dr_grpo"}})
    assert [s.advantage for s in dr] == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    assert dr_stats["vote/dropped"] == 3.0
    kept, kept_stats, _ = run({"vote": by_ep}, drop=False)
    assert [s.advantage for s in kept] == approx32([R2, -1 / R2, -1 / R2, 0, 0, 0])
    assert kept_stats["vote/dropped"] == 0.0
    assert [s.extras["group"] for s in kept] == ["ep0"] * 3 + ["ep1"] * 3
    # one group over the whole step: rewards 1,0,0,1,1,1 mean 2/3, std sqrt(2)/3
    whole, _, _ = run({"vote": {"name": "dr_grpo", "group_by": []}})
    assert [s.advantage for s in whole] == pytest.approx([1 / 3, -2 / 3, -2 / 3, 1 / 3, 1 / 3, 1 / 3])
    by_role, _, _ = run({"vote": {"name": "dr_grpo", "group_by": ["episode", "role"]}}, drop=False)
    # ep0 civilians a, c: 1, 0 -> +-0.5; the spy alone: 0
    assert [s.advantage for s in by_role] == pytest.approx([0.5, 0.0, -0.5, 0, 0, 0])
    assert by_role[0].extras["group"] == "ep0|civilian"


def test_rae_wiring_into_samples_alpha_0_7_paper_order() -> None:
    est = {"perform": {"name": "rae", "options": {"order": "paper", "alpha": 0.7}}}
    cfg = LearnerConfig(estimators=est)
    states = EstimatorStates(cfg.estimators)
    states.load_state_dict({"perform": {"values": {"spy": 0.2}}})
    samples, stats, _ = run(est, phases=("perform",), states=states)
    # ep0 reads b_spy 0.2, b_civ 0: civ 0.1, spy -0.5, civ 0.2; then b_spy = 0.7*0.2 + 0.3*-0.3 = 0.05,
    # b_civ = 0.3*0.15 = 0.045. ep1: civ -0.145, spy 0.45, civ -0.345; then b_spy = 0.035 + 0.15 = 0.185,
    # b_civ = 0.0315 - 0.06 = -0.0285.
    assert [s.advantage for s in samples] == pytest.approx([0.1, -0.5, 0.2, -0.145, 0.45, -0.345])
    assert [s.role for s in samples] == ["civilian", "spy", "civilian"] * 2
    assert states.state_dict() == {"perform": {"values": pytest.approx({"spy": 0.185, "civilian": -0.0285})}}
    assert states.metrics() == pytest.approx({"rae/spy": 0.185, "rae/civilian": -0.0285})
    assert stats["perform/dropped"] == 0.0 and stats["perform/reward_mean"] == pytest.approx(0.1 / 6)


def test_rae_code_and_spiral_orders_with_alpha_0_7() -> None:
    rewards = torch.tensor([0.1, -0.3, 0.2], dtype=torch.float64)
    roles = ["civilian", "spy", "civilian"]
    games = torch.tensor([0, 0, 0])
    adv, keep, values = role_advantages(rewards, roles, games, {"spy": 0.2}, alpha=0.7, order="code")
    raw = torch.tensor([0.1 - 0.045, -0.3 - 0.05, 0.2 - 0.045], dtype=torch.float64)
    assert adv.tolist() == pytest.approx(((raw - raw.mean()) / (raw.std(unbiased=False) + 1e-6)).tolist())
    assert values == pytest.approx({"spy": 0.05, "civilian": 0.045}) and keep.all()
    adv, keep, _ = role_advantages(torch.tensor([0.2, 0.0]), ["spy", "civilian"], torch.tensor([0, 0]), {"spy": 0.2},
                                   alpha=0.7, order="spiral")
    assert adv.tolist() == pytest.approx([0.0, 0.0]) and keep.tolist() == [False, False]


def test_estimator_input_drop_flag_and_challenger() -> None:
    rewards = torch.tensor([2.0, 2.0, 5.0], dtype=torch.float64)
    inp = EstimatorInput(rewards=rewards, keys=[{"q": "1"}, {"q": "1"}, {"q": "2"}], roles=["s"] * 3,
                         games=torch.tensor([0, 0, 1]), turns=[], episodes=[], group_by=["q"])
    out = get_estimator("grpo").fn(inp, None, {})
    assert out.advantages.tolist() == [0.0, 0.0, 0.0] and out.keep.tolist() == [False, False, False]
    ch = get_estimator("lsp_challenger").fn(inp, None, {})
    assert ch.advantages.tolist() == pytest.approx([-1.0, -1.0, 2.0]) and ch.keep.all()
    flat = EstimatorInput(rewards=torch.tensor([1.0, 1.0], dtype=torch.float64), keys=[{}, {}], roles=["s", "s"],
                          games=torch.tensor([0, 1]), turns=[], episodes=[], group_by=[])
    assert not get_estimator("lsp_challenger").fn(flat, None, {}).keep.any()
    keep_all = EstimatorInput(**{**flat.__dict__, "drop_zero_variance": False})
    assert get_estimator("lsp_challenger").fn(keep_all, None, {}).keep.all()
    assert get_estimator("lsp_solver").fn(keep_all, None, {}).keep.all()
    assert get_estimator("dr_grpo").fn(keep_all, None, {}).advantages.tolist() == [0.0, 0.0]


def test_trajectory_credit_uses_episode_totals() -> None:
    eps = batch()
    turns, games = trainable_turns(eps, "vote", "learner")
    est = LearnerConfig(estimators={"vote": {"name": "grpo", "credit": "trajectory"}}).estimators["vote"]
    # ep0: a 0.1 + 1 + 1 (its tokenless vote), b -0.3 + 0, c 0.2 + 0; ep1: a 0.9, b 1.5, c 0.7
    assert credited_rewards(turns, games, eps, est).tolist() == pytest.approx([2.1, -0.3, 0.2, 0.9, 1.5, 0.7])


def test_group_helpers() -> None:
    keys = [{"a": "x", "b": "1"}, {"a": "y"}, {"a": "x", "b": "1"}, {"a": "x", "b": "2"}]
    assert group_index(keys, ["a", "b"]).tolist() == [0, 1, 0, 2]
    assert group_index(keys, ["a"]).tolist() == [0, 1, 0, 0]
    v = torch.tensor([1.0, 4.0, 3.0, 8.0], dtype=torch.float64)
    mean, std = group_mean_std(v, torch.tensor([0, 1, 0, 0]))
    assert mean.tolist() == pytest.approx([4.0, 4.0, 4.0, 4.0])
    assert std.tolist() == pytest.approx([math.sqrt(26 / 3), 0.0, math.sqrt(26 / 3), math.sqrt(26 / 3)])
    assert grpo(v, torch.tensor([0, 1, 0, 0]), eps=0.5).tolist() == pytest.approx(
        [-3 / (math.sqrt(26 / 3) + 0.5), 0.0, -1 / (math.sqrt(26 / 3) + 0.5), 4 / (math.sqrt(26 / 3) + 0.5)]
    )
    assert zero_variance(torch.tensor([1.0, 1.0 + 1e-9, 2.0]), torch.tensor([0, 0, 1])).tolist() == [True, True, True]
    assert zero_variance(torch.tensor([1.0, 1.1]), torch.tensor([0, 0])).tolist() == [False, False]
    assert zero_variance(torch.tensor([1.0, 1.0 + 1.5e-8], dtype=torch.float64), torch.tensor([0, 0]), tol=1e-8).tolist() == [
        True, True]


# ------------------------------------------------------------ losses with asymmetric clips
def test_clip_low_differs_from_clip_high_and_the_upper_clip_binds() -> None:
    ratios = torch.tensor([[1.5, 0.8, 0.8, 1.5, 1.2, 1.25]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 2.0, 1.0]])
    loss = clipped_surrogate(ratios.log(), torch.zeros(1, 6), adv, clip_low=0.1, clip_high=0.3)
    # A>0: 1.5 -> clipped at 1+0.3 (upper binds); 0.8 -> unclipped 0.8 (min); A<0: 0.8 -> -(0.9) lower binds;
    # 1.5 -> -1.5; 1.2 inside; 1.25 inside the upper clip 1.3 (but outside 1.2: a swapped clip would bind)
    assert (-loss).tolist()[0] == pytest.approx([1.3, 0.8, -0.9, -1.5, 2.4, 1.25])
    swapped = clipped_surrogate(ratios.log(), torch.zeros(1, 6), adv, clip_low=0.3, clip_high=0.1)
    assert (-swapped).tolist()[0] == pytest.approx([1.1, 0.8, -0.8, -1.5, 2.2, 1.1])
    grad_in = ratios.log().requires_grad_()
    clipped_surrogate(grad_in, torch.zeros(1, 6), adv, clip_low=0.1, clip_high=0.3).sum().backward()
    # d(-r*A)/dlogp = -r*A where unclipped, 0 where the clip binds
    assert grad_in.grad.tolist()[0] == pytest.approx([0.0, -0.8, 0.0, 1.5, -2.4, -1.25])


def test_per_token_advantages_and_old_logp() -> None:
    logp = torch.tensor([[-1.0, -2.0]])
    old = torch.tensor([[-1.0, -2.0 - math.log(1.1)]])  # ratios 1, 1.1
    loss = clipped_surrogate(logp, old, torch.tensor([[3.0, -2.0]]), clip_low=0.05, clip_high=0.05)
    assert loss.tolist()[0] == pytest.approx([-3.0, 2.2])
    rl = reinforce_detached(logp, torch.tensor([[3.0, -2.0]]))
    assert rl.tolist()[0] == pytest.approx([-3.0, 2.0])


def test_kl_values_are_not_symmetric() -> None:
    logp, ref = torch.tensor([[-1.0, -3.0]]), torch.tensor([[-2.0, -1.0]])
    assert kl_penalty(logp, ref, "k1").tolist()[0] == pytest.approx([1.0, -2.0])
    # k3 with d = ref - logp = -1, +2
    assert kl_penalty(logp, ref, "k3").tolist()[0] == pytest.approx([math.exp(-1) + 1 - 1, math.exp(2) - 2 - 1])
    assert kl_penalty(logp, ref).tolist() == kl_penalty(logp, ref, "k3").tolist(), "k3 is the default"


def test_aggregation_values_and_weights_with_uneven_lengths() -> None:
    loss = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 6.0, 0.0, 0.0], [5.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert float(aggregate(loss, mask)) == pytest.approx(16 / 5), "token is the default"
    assert float(aggregate(loss, mask, "sequence")) == pytest.approx((2 + 5 + 0) / 3)
    assert float(aggregate(loss, mask, "constant", constant=4.0)) == pytest.approx(16 / 12)
    with pytest.raises(ValueError, match="needs the constant"):
        aggregate(loss, mask, "constant")
    assert float(aggregate(loss, torch.zeros_like(mask))) == 0.0
    w = aggregation_weights(mask, "token", batch_tokens=5.0, batch_seqs=3, constant=None)
    assert w.flatten().tolist() == pytest.approx((mask / 5).flatten().tolist())
    assert aggregation_weights(mask, "token", 0.0, 3, None).tolist() == mask.tolist(), "at least one token"
    w = aggregation_weights(mask, "sequence", batch_tokens=5.0, batch_seqs=3, constant=None)
    assert w[0].tolist() == pytest.approx([1 / 9, 1 / 9, 1 / 9, 0.0]) and w[1].tolist() == pytest.approx([1 / 6, 1 / 6, 0, 0])
    assert w[2].tolist() == [0.0] * 4
    w = aggregation_weights(mask, "constant", batch_tokens=5.0, batch_seqs=3, constant=4.0)
    assert w.flatten().tolist() == pytest.approx((mask / 12).flatten().tolist())
    with pytest.raises(ValueError, match="needs the constant"):
        aggregation_weights(mask, "constant", 5.0, 3, None)


def test_phases_without_turns_or_estimator_do_not_stop_later_phases() -> None:
    est = {"vote": {"name": "dr_grpo", "group_by": ["episode"]}, "silent": {"name": "grpo"}}
    samples, stats, _ = run(est, phases=("unknown", "silent", "vote"))
    assert len(samples) == 3 and set(stats) == {"vote/turns", "vote/dropped", "vote/reward_mean"}
    eps = batch()
    eps[0].turns[3].probe_ids = {"all_skills": [9, 9]}
    cfg = LearnerConfig(estimators={"vote": {"name": "dr_grpo", "group_by": ["episode"]}})
    got, _ = build_samples(eps, ["vote"], cfg, EstimatorStates(cfg.estimators), "learner")
    assert got[0].probes == {"all_skills": [9, 9]} and got[1].probes == {}
    assert got[0].prompt_ids == [1, 3] and got[0].completion_ids == [5, 6] and got[0].logprobs == [-0.5, -0.5]
    assert got[0].phase == "vote" and got[0].weight == 1.0


# ------------------------------------------------------------ schedule: exact boundaries and named phases
def test_progress_boundaries_are_inclusive_and_joint_names_its_stage() -> None:
    from pydantic import TypeAdapter

    from arena.learners.schedule import ScheduleConfig
    from arena.learners.progress import Progress
    from arena.learners.schedule import make_schedule, schedule_phases

    adapter = TypeAdapter(ScheduleConfig)
    prog = make_schedule(adapter.validate_python({"rule": "progress", "stages": [["a"], ["b", "a", "b"], ["c"]],
                                                  "boundaries": [0.2, 0.6]}), [])
    # total 6: fractions 0, 0.2, 0.4, 0.6, 0.8, 1.0 -- a stage starts AT its boundary
    assert [prog.phases(Progress(s, 6)) for s in range(1, 7)] == [["a"], ["b", "a"], ["b", "a"], ["c"], ["c"], ["c"]]
    with pytest.raises(ValueError, match=r"^schedule rule 'progress' needs the training progress \(phases\(Progress\(step, total\)\)\)$"):
        prog.phases()
    assert schedule_phases(adapter.validate_python({"rule": "joint", "stages": [["x", "y"]]})) == {"x", "y"}
    assert schedule_phases(adapter.validate_python({"rule": "progress", "stages": [["a"], ["b"]], "boundaries": [0.5]})) == {
        "a", "b"}


def test_sequence_advantages_broadcast_over_tokens_and_default_clips() -> None:
    logp = torch.log(torch.tensor([[1.0, 1.5], [1.1, 0.5]]))
    loss = clipped_surrogate(logp, torch.zeros(2, 2), torch.tensor([1.0, -2.0]))  # defaults: clip 0.2 both sides
    # row 0 (A=1): 1.0, clip(1.5)=1.2; row 1 (A=-2): min(-2.2, -2.2), min(-1.0, -1.6) = -1.6
    assert (-loss).tolist() == [pytest.approx([1.0, 1.2]), pytest.approx([-2.2, -1.6])]
    assert reinforce_detached(logp, torch.tensor([1.0, -2.0])).tolist() == [[-1.0, -1.0], [2.0, 2.0]]


def test_sequence_weights_of_a_one_token_row_and_exact_messages() -> None:
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    w = aggregation_weights(mask, "sequence", batch_tokens=4.0, batch_seqs=2, constant=None)
    assert w.flatten().tolist() == pytest.approx([0.5, 0, 0, 1 / 6, 1 / 6, 1 / 6])
    with pytest.raises(ValueError, match=r"^aggregation 'constant' needs the constant$"):
        aggregation_weights(mask, "constant", 4.0, 2, None)
    with pytest.raises(ValueError, match=r"^aggregation 'constant' needs the constant \(e\.g\. the max completion length\)$"):
        aggregate(mask, mask, "constant")


def test_one_token_batches() -> None:
    loss, mask = torch.tensor([[5.0, 7.0]]), torch.tensor([[1.0, 0.0]])
    assert float(aggregate(loss, mask, "token")) == 5.0 and float(aggregate(loss, mask, "sequence")) == 5.0
    assert aggregation_weights(mask, "token", 1.0, 1, None).tolist() == [[1.0, 0.0]]


def test_rae_defaults_are_the_paper_order_with_alpha_0_9() -> None:
    rewards, roles, games = torch.tensor([0.5, -0.5, 1.0]), ["spy", "civilian", "spy"], torch.tensor([0, 0, 1])
    adv, keep, values = role_advantages(rewards, roles, games, {})
    assert adv.tolist() == pytest.approx([0.5, -0.5, 1.0 - 0.05])  # game 1 reads b_spy = 0.1 * 0.5
    assert values == pytest.approx({"spy": 0.9 * 0.05 + 0.1, "civilian": -0.05}) and keep.all()


def test_zero_variance_tolerance_is_inclusive() -> None:
    assert zero_variance(torch.tensor([0.0, 1.0]), torch.tensor([0, 0]), tol=0.5).tolist() == [True, True]
    assert zero_variance(torch.tensor([0.0, 1.0]), torch.tensor([0, 0]), tol=0.49).tolist() == [False, False]


def test_state_metrics_skip_stateless_phases_and_name_unknown_ones_by_phase() -> None:
    cfg = LearnerConfig(estimators={"vote": {"name": "grpo"}, "perform": {"name": "rae"}})
    states = EstimatorStates(cfg.estimators)
    states.load_state_dict({"vote": {}, "perform": {"values": {"spy": 0.5}}, "old": {"values": {"x": 2}}})
    assert states.metrics() == {"rae/spy": 0.5, "old/x": 2.0}
    assert states.for_phase("vote") == {} and states.for_phase("new") == {} and "new" in states.state_dict()


def test_schedule_config_objects_validate_again_by_their_rule() -> None:
    from pydantic import TypeAdapter, ValidationError

    from arena.learners.schedule import ScheduleConfig
    from arena.learners.schedule import CycleConfig, HysteresisConfig

    adapter = TypeAdapter(ScheduleConfig)
    cycle = adapter.validate_python({"rule": "cycle", "stages": [["a"], ["b"]], "every": 2})
    assert isinstance(cycle, CycleConfig) and adapter.validate_python(cycle) == cycle
    hyst = adapter.validate_python({"rule": "hysteresis", "stages": [{"phases": ["a"]}]})
    assert isinstance(adapter.validate_python(hyst), HysteresisConfig)
    with pytest.raises(ValidationError, match="unknown schedule rule"):
        adapter.validate_python(3)


def test_group_keys_missing_or_empty_are_the_same_group() -> None:
    assert group_index([{"a": ""}, {}, {"a": "XXXX"}, {"a": None}], ["a"]).tolist() == [0, 0, 1, 2]
    empty = torch.tensor([], dtype=torch.float64)
    assert grpo(empty, torch.tensor([], dtype=torch.long)).tolist() == []
    assert zero_variance(empty, torch.tensor([], dtype=torch.long)).tolist() == []


def test_rae_keeps_zero_advantages_except_in_spiral_order() -> None:
    for order in ("paper", "code"):
        _, keep, _ = role_advantages(torch.tensor([0.0, 0.0]), ["spy", "civilian"], torch.tensor([0, 0]), {}, order=order)
        assert keep.tolist() == [True, True], order


def test_credited_rewards_are_float64_and_group_extras_tolerate_missing_keys() -> None:
    eps = batch()
    turns, games = trainable_turns(eps, "vote", "learner")
    for credit in ("turn", "trajectory"):
        est = LearnerConfig(estimators={"vote": {"name": "grpo", "credit": credit}}).estimators["vote"]
        got = credited_rewards(turns, games, eps, est)
        assert got.dtype == torch.float64, credit
    samples, _, _ = run({"vote": {"name": "dr_grpo", "group_by": ["episode", "source"]}})
    assert [s.extras["group"] for s in samples] == ["ep0|"] * 3


PROBE_SEEN: list = []


def _probe(inp: EstimatorInput, options: object, state: dict) -> EstimatorOutput:
    PROBE_SEEN.append((inp.turns, inp.episodes, inp.games.tolist(), inp.roles))
    n = len(inp.rewards)
    return EstimatorOutput(inp.rewards * 2, torch.ones_like(inp.rewards, dtype=torch.bool),
                           extras=[{"pass_rate": i / n} for i in range(n)])


def test_a_registered_estimator_sees_the_turns_and_episodes() -> None:
    if "test_values_probe" not in ESTIMATORS:  # registered at test time (once per process)
        register_estimator("test_values_probe")(_probe)
    assert get_estimator("test_values_probe").name == "test_values_probe"
    assert get_estimator("grpo").name == "grpo"
    eps = batch()
    cfg = LearnerConfig(estimators={"vote": {"name": "test_values_probe"}})
    samples, _ = build_samples(eps, ["vote"], cfg, EstimatorStates(cfg.estimators), "learner")
    turns, episodes, games, roles = PROBE_SEEN[-1]
    assert [t.seat for t in turns] == list("abcabc") and episodes is eps and games == [0, 0, 0, 1, 1, 1]
    assert roles == ["civilian", "spy", "civilian"] * 2
    assert [s.advantage for s in samples] == [2.0, 0.0, 0.0, 2.0, 2.0, 2.0]
    assert samples[3].extras == {"group": "ep1|vote", "finish_reason": "stop", "reward": 1.0, "pass_rate": 0.5}
