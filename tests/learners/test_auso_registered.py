"""AUSO through the registries: the ``auso`` estimator and the ``auso_distill`` term against a reference loop."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import flat_grad, seq_log_softmax

from arena.core.types import Episode, Sample, Turn
from arena.learners.auso import AusoSchedule, internalisation_weights, stage_weights, topk_jsd, union_topk_jsd
from arena.learners.config import LearnerConfig
from arena.learners.estimators import EstimatorInput, get_estimator
from arena.learners.progress import Progress
from tolerance import approx32, close32

K, COEF, TEMP = 5, 0.1, 1.0


def _turn(seat: str) -> Turn:
    return Turn(index=0, seat=seat, role="agent", phase="act", messages=[], completion="")


def test_auso_estimator_keeps_all_fail_tasks_and_records_pass_rates() -> None:
    episodes = [Episode(episode_id=f"e{i}", game="household_v0", metrics={"success_rate": p}) for i, p in enumerate([0.0, 1.0, 0.5])]
    rewards = torch.tensor([-0.1, -0.1, 1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    games = torch.tensor([0, 0, 1, 1, 2, 2])
    inp = EstimatorInput(
        rewards=rewards, keys=[{"episode": f"e{g}"} for g in games.tolist()], roles=["agent"] * 6, games=games,
        turns=[_turn("a")] * 6, episodes=episodes, group_by=["episode"],
    )
    spec = get_estimator("auso")
    out = spec.fn(inp, spec.options(), {})
    assert out.keep.tolist() == [True, True, False, False, True, True]  # all-success dropped, all-fail kept
    assert out.advantages[:4].tolist() == [0.0] * 4 and out.advantages[4] > 0 > out.advantages[5]
    assert [e["pass_rate"] for e in out.extras] == [0.0, 0.0, 1.0, 1.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="no metric 'solved'"):
        spec.fn(inp, spec.options(pass_metric="solved"), {})


def distill_samples() -> list[Sample]:
    """Three all-fail actions with a teacher prompt, one of a half-solved task, one without a probe."""
    failed = {"pass_rate": 0.0, "finish_reason": "stop"}
    return [
        Sample(prompt_ids=[3, 4, 5], completion_ids=[9, 10, 11], advantage=0.0, probes={"teacher": [20, 21, 22]}, extras=failed),
        Sample(prompt_ids=[3, 4, 5], completion_ids=[12, 13], advantage=0.0, probes={"teacher": [30, 31]}, extras=failed),
        Sample(prompt_ids=[6, 7], completion_ids=[14, 15, 16, 17], advantage=0.0, probes={"teacher": [23, 24]}, extras=failed),
        Sample(prompt_ids=[6, 8], completion_ids=[18, 19], advantage=0.0, probes={"teacher": [25]},
               extras={"pass_rate": 0.5, "finish_reason": "stop"}),
        Sample(prompt_ids=[8], completion_ids=[18, 19], advantage=0.0, extras=failed),
    ]


def reference(model: Any, samples: list[Sample], progress: Progress) -> torch.Tensor:
    chosen = [s for s in samples if "teacher" in s.probes and s.extras.get("pass_rate") == 0.0]
    per_action = []
    for s in chosen:
        policy = seq_log_softmax(model, s.prompt_ids, s.completion_ids, TEMP)
        with torch.no_grad():
            teacher = seq_log_softmax(model, s.probes["teacher"], s.completion_ids, TEMP)
        per_action.append(topk_jsd(policy, teacher, K).mean())
    jsds = torch.stack(per_action)
    w = internalisation_weights(jsds, 0.2, min(1.0, progress.step / 5))
    w_int = stage_weights(progress, AusoSchedule()).w_int
    return COEF * w_int * (w * jsds).sum() / len(chosen)


def cfg(**options: Any) -> dict[str, Any]:
    return {"loss": "reinforce", "objectives": [{"name": "auso_distill", "coef": COEF, "options": {"topk": K} | options}]}


def test_auso_distill_value_and_gradient_equal_a_reference_loop(tiny: Any, learner_gradient: Any) -> None:
    samples, progress = distill_samples(), Progress(3, 20)
    model = copy.deepcopy(tiny)
    expected = reference(model, samples, progress)
    expected.backward()
    # One micro-batch (no prompt sharing), so the action weights are z-scored over all selected actions.
    grad, stats = learner_gradient(samples, progress, temperature=TEMP, token_budget=10_000, share_prompt_prefix=False, **cfg())
    assert stats["obj/auso_distill"] == approx32(float(expected.detach()))
    assert float(expected.detach()) > 1e-5
    close32(grad, flat_grad(model))


@pytest.mark.parametrize("budget", [8, 12])
def test_auso_distill_micro_batched_equals_full_batch(tiny: Any, learner_gradient: Any, budget: int) -> None:
    """The audit's case: the action weights are z-scored over the WHOLE batch's selected actions, so
    several micro-batches give the one-micro-batch gradient and term (before #24 all cases differed)."""
    samples, progress = distill_samples(), Progress(3, 20)
    model = copy.deepcopy(tiny)
    expected = reference(model, samples, progress)
    expected.backward()
    full, full_stats = learner_gradient(samples, progress, temperature=TEMP, token_budget=10_000,
                                        share_prompt_prefix=False, **cfg())
    micro, micro_stats = learner_gradient(samples, progress, temperature=TEMP, token_budget=budget,
                                          share_prompt_prefix=False, **cfg())
    assert full_stats["micro_batches"] == 1 and micro_stats["micro_batches"] > 2
    assert micro_stats["obj/auso_distill"] == approx32(full_stats["obj/auso_distill"])
    assert micro_stats["obj/auso_distill"] == approx32(float(expected.detach()))
    close32(micro, full)
    close32(micro, flat_grad(model))


def test_auso_distill_is_off_outside_internalisation_and_near_the_length_cap(learner_gradient: Any) -> None:
    samples = distill_samples()
    _, late = learner_gradient(samples, Progress(10, 20), temperature=TEMP, **cfg())
    assert late["obj/auso_distill"] == 0.0  # w_int is 0 past the first fifth
    capped = [s.model_copy(update={"extras": s.extras | {"finish_reason": "length"}}) if i == 0 else s
              for i, s in enumerate(samples)]
    _, skipped = learner_gradient(capped, Progress(1, 20), temperature=TEMP, **cfg())
    assert skipped["obj/auso_distill"] == 0.0  # 1 of 5 responses hit the cap: over 5%
    _, long = learner_gradient(samples, Progress(1, 20), temperature=TEMP, **cfg(length_cap=5))
    assert long["obj/auso_distill"] == 0.0  # mean length 2.6 > 0.4 * 5
    _, on = learner_gradient(samples, Progress(1, 20), temperature=TEMP, **cfg(length_cap=100))
    assert on["obj/auso_distill"] > 0.0


def test_auso_defaults_are_the_papers() -> None:
    """A config that omits them: coefficient 0.1 (jsd_distill keeps 1.0), the length-cap rule on with
    the trainable policy's max_new_tokens (``auto``, resolved by the trainer; unresolved: off)."""
    from arena.learners.auso import AusoDistill, AusoDistillOptions, resolve_length_cap
    from arena.learners.update import build_objectives

    cfg = LearnerConfig(objectives=[{"name": "auso_distill"}, {"name": "jsd_distill"}, {"name": "auso_distill", "coef": 0.5,
                                                                                          "options": {"length_cap": None}}])
    terms = build_objectives(cfg.objectives)
    assert [t.coef for _, t in terms] == [0.1, 1.0, 0.5]
    assert cfg.objectives[0].options["length_cap"] == "auto" and AusoDistillOptions().max_capped == 0.05
    resolved = resolve_length_cap(cfg, 300)
    assert [o.options.get("length_cap") for o in resolved.objectives] == [300, None, None]
    assert build_objectives(resolved.objectives)[0][1].options.length_cap == 300
    assert cfg.objectives[0].options["length_cap"] == "auto"  # the original is left alone
    long = [Sample(prompt_ids=[1], completion_ids=[2] * 130, advantage=0.0, extras={"finish_reason": "stop"})] * 2
    assert not AusoDistill(AusoDistillOptions(length_cap=300), 0.1)._allowed(long)  # mean 130 > 0.4 * 300
    assert AusoDistill(AusoDistillOptions(length_cap=400), 0.1)._allowed(long)  # 130 <= 160
    assert AusoDistill(AusoDistillOptions(), 0.1)._allowed(long)  # auto, unresolved: the rule is off


def test_household_defaults_are_the_public_codes() -> None:
    from arena.loop.config import parse_config

    cfg = parse_config({"game": {"name": "household"}})
    assert cfg.learner.beta == 0.01 and cfg.learner.kl_estimator == "k3"
    assert cfg.learner.estimators["act"].trajectory_stats == "attempt"


def test_auso_configs_validate() -> None:
    LearnerConfig(estimators={"act": {"name": "auso", "group_by": ["episode"], "credit": "trajectory"}},
                  objectives=[{"name": "auso_distill", "coef": 0.1, "options": {"schedule": {"ramp_steps": 0}}}])
    with pytest.raises(ValueError, match="boundaries"):
        LearnerConfig(objectives=[{"name": "auso_distill", "options": {"schedule": {"boundaries": [0.8, 0.2]}}}])


def utilise_samples() -> list[Sample]:
    """Two tasks of three attempts (pass rates 1/3 and 2/3), each with a no-skill prompt; one extra without it."""
    out = []
    for task, rate in (("e0", 1 / 3), ("e1", 2 / 3)):
        for j in range(3):
            base = 3 + 7 * j + (0 if task == "e0" else 2)
            out.append(Sample(prompt_ids=[base, base + 1, base + 2], completion_ids=[9 + j, 10, 11 + j][: 2 + j % 2],
                              advantage=(1.0 if j == 0 else -0.5) * (1 if task == "e0" else -1),
                              probes={"no_skill": [base + 2]}, extras={"group": task, "pass_rate": rate}))
    out.append(Sample(prompt_ids=[8], completion_ids=[18, 19], advantage=0.7, extras={"group": "e2", "pass_rate": 0.5}))
    return out


def test_auso_utilise_scales_advantages_by_the_reference_weights(tiny: Any, learner_gradient: Any) -> None:
    samples, progress = utilise_samples(), Progress(20, 20)  # w_util = 1
    model = copy.deepcopy(tiny)
    with torch.no_grad():
        sens = []
        for s in samples[:6]:
            student = seq_log_softmax(model, s.prompt_ids, s.completion_ids, TEMP)
            bare = seq_log_softmax(model, s.probes["no_skill"], s.completion_ids, TEMP)
            sens.append(float(union_topk_jsd(student, bare, K).mean()))  # symmetric: the union's top-k
    from arena.learners.auso import utilisation_weights

    w = utilisation_weights(torch.tensor(sens, dtype=torch.float64), torch.tensor([0, 0, 0, 1, 1, 1]),
                            torch.tensor([1 / 3] * 3 + [2 / 3] * 3, dtype=torch.float64), w_util=1.0).tolist() + [1.0]
    assert min(w) < 0.99 and max(w) > 1.01
    weighted = [s.model_copy(update={"token_weights": [wi] * len(s.completion_ids)}) for s, wi in zip(samples, w, strict=True)]
    term = {"objectives": [{"name": "auso_utilise", "options": {"topk": K}}]}
    got, stats = learner_gradient(samples, progress, temperature=TEMP, **term)
    want, _ = learner_gradient(weighted, progress, temperature=TEMP)
    close32(got, want)
    assert stats["obj/auso_utilise/weight_mean"] == pytest.approx(1.0)
    assert stats["obj/auso_utilise/weight_max"] == approx32(max(w))
    early, _ = learner_gradient(samples, Progress(2, 20), temperature=TEMP, **term)  # w_util = 0: plain GRPO
    plain, _ = learner_gradient(samples, Progress(2, 20), temperature=TEMP)
    torch.testing.assert_close(early, plain)


@pytest.mark.parametrize(("step", "forwards"), [(1, 3), (10, 1), (20, 3)])
def test_probes_cost_forward_passes_only_in_their_stage(tiny: Any, step: int, forwards: int) -> None:
    """One micro-batch: the training forward, plus the teacher probe and the student's own no-grad
    pass (the whole batch's action weights, before the update) while internalising (step 1 of 20),
    nothing extra in the GRPO middle (step 10), the student's own no-grad pass and the no-skill probe
    (counted as one call each to the model) while utilising (step 20)."""
    from tiny_model import PAD

    from arena.learners.update import Learner

    samples = [s.model_copy(update={"probes": s.probes | {"no_skill": [5, 6]}}) for s in distill_samples()[:3]]
    cfg = LearnerConfig(lr=1e-3, beta=0.0, token_budget=10_000, share_prompt_prefix=False, objectives=[
        {"name": "auso_distill", "coef": COEF, "options": {"topk": K}}, {"name": "auso_utilise", "options": {"topk": K}}])
    learner = Learner(copy.deepcopy(tiny), cfg, PAD, TEMP)
    calls: list[int] = []
    inner = learner._log_softmax
    learner._log_softmax = lambda model, mb: (calls.append(1), inner(model, mb))[1]  # type: ignore[method-assign]
    learner.step(samples, Progress(step, 20))
    assert len(calls) == forwards
