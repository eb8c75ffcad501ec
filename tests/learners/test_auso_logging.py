"""AUSO's logging: the schedule, internalisation and utilisation statistics with hand values,
their sums over micro-batches and epochs, and the per-action JSD / weight saved per turn."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from test_auso_registered import COEF, K, TEMP, distill_samples, utilise_samples
from tiny_model import seq_log_softmax

from arena.core.types import Episode, Sample, Turn
from arena.view.record import compact_episode
from arena.learners.auso import (
    AusoDistill, AusoDistillOptions, AusoUtilise, AusoUtiliseOptions, internalisation_weights, summary, topk_jsd,
)
from arena.learners.progress import Progress
from tolerance import approx32

NAN = math.nan


def _close(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == approx32(want)


def test_summary_is_over_the_values_present() -> None:
    x = torch.tensor([0.1, NAN, 0.5, 0.3], dtype=torch.float64)
    got = summary(x, "s", ("mean", "std", "min", "max"))
    assert got["s_mean"] == pytest.approx(0.3) and got["s_min"] == 0.1 and got["s_max"] == 0.5
    assert got["s_std"] == pytest.approx(math.sqrt(0.08 / 3))  # population: ((0.2)^2 + 0 + 0.2^2) / 3
    assert all(math.isnan(v) for v in summary(torch.full((2,), NAN), "s").values())


def test_utilisation_stats_by_hand() -> None:
    """Task a: p = 1/2, I = 0.1, 0.2, 0.3 -> m = -1, 0, 1 -> w = 0.8, 1, 1.2; task b: p = 1, I = 0.5, 0.5
    -> gate 0, m = 0, w = 1; one sample without the probe (NaN) stays out of every statistic."""
    samples = [Sample(prompt_ids=[1], completion_ids=[2], advantage=1.0, extras={"group": g, "pass_rate": p})
               for g, p in [("a", 0.5)] * 3 + [("b", 1.0)] * 2 + [("c", 0.5)]]
    values = torch.tensor([0.1, 0.2, 0.3, 0.5, 0.5, NAN], dtype=torch.float64)
    term = AusoUtilise(AusoUtiliseOptions(), 1.0)
    progress = Progress(20, 20)  # w_util = 1
    w = term.action_weights(samples, values, progress)
    assert w.tolist() == pytest.approx([0.8, 1.0, 1.2, 1.0, 1.0, 1.0])
    stats, per_sample = term.step_stats(samples, {"value": values, "weight": w}, progress)
    want = {
        "auso/w_util": 1.0,
        "auso/util_sensitivity_mean": 0.32, "auso/util_sensitivity_std": 0.16,  # sqrt((.22^2+.12^2+.02^2+2*.18^2)/5)
        "auso/util_sensitivity_min": 0.1, "auso/util_sensitivity_max": 0.5,
        "auso/util_gate_mean": 0.5, "auso/util_gate_zero_share": 0.5,  # tasks a (gate 1) and b (gate 0)
        "auso/util_m_min": -1.0, "auso/util_m_max": 1.0,
        "auso/util_weight_min": 0.8, "auso/util_weight_max": 1.2, "auso/util_weight_mean": 1.0,
    }
    assert stats.keys() == want.keys()
    assert all(_close(stats[k], v) for k, v in want.items()), stats
    assert per_sample["auso_jsd"][:5].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.5, 0.5])
    assert per_sample["auso_weight"][:5].tolist() == pytest.approx([0.8, 1.0, 1.2, 1.0, 1.0])
    assert math.isnan(per_sample["auso_jsd"][5]) and math.isnan(per_sample["auso_weight"][5])
    early, kept = term.step_stats(samples, {}, Progress(2, 20))  # not reweighting: the schedule only
    assert early == {"auso/w_util": 0.0} and kept == {}


def test_internalisation_stats_by_hand() -> None:
    samples = distill_samples()  # rows 0-2 selected (all-fail, teacher probe), 3 half-solved, 4 no probe
    term = AusoDistill(AusoDistillOptions(), COEF)
    jsd = torch.tensor([0.2, 0.4, 0.9, NAN, NAN], dtype=torch.float64)
    weight = torch.tensor([0.8, 0.9, 1.3, NAN, NAN], dtype=torch.float64)
    stats, per_sample = term.step_stats(samples, {"jsd": jsd, "weight": weight}, Progress(3, 20))
    want = {
        "auso/w_int": 0.6 * (1 - (2 / 19 / 0.2) ** 2 * (3 - 2 * (2 / 19 / 0.2))),  # ramp 3/5, smooth decay
        "auso/int_actions": 3.0, "auso/int_skipped": 0.0, "auso/int_capped_share": 0.0,
        "auso/int_jsd_mean": 0.5, "auso/int_jsd_max": 0.9,
        "auso/int_weight_min": 0.8, "auso/int_weight_max": 1.3, "auso/int_weight_mean": 1.0,
    }
    assert stats.keys() == want.keys()
    assert all(_close(stats[k], v) for k, v in want.items()), stats
    assert per_sample["auso_jsd"] is jsd and per_sample["auso_weight"] is weight
    capped = [s.model_copy(update={"extras": s.extras | {"finish_reason": "length"}}) if i < 2 else s
              for i, s in enumerate(samples)]
    skipped, _ = term.step_stats(capped, {}, Progress(1, 20))  # skipped: no records, NaN statistics
    assert skipped["auso/int_skipped"] == 1.0 and skipped["auso/int_capped_share"] == pytest.approx(0.4)
    assert skipped["auso/int_actions"] == 3.0 and math.isnan(skipped["auso/int_jsd_mean"])
    assert term.step_stats(samples, {}, Progress(10, 20)) == ({"auso/w_int": 0.0}, {})


def _reference_jsd(model: Any, samples: list[Sample]) -> list[float]:
    out = []
    with torch.no_grad():
        for s in samples[:3]:
            policy = seq_log_softmax(model, s.prompt_ids, s.completion_ids, TEMP)
            teacher = seq_log_softmax(model, s.probes["teacher"], s.completion_ids, TEMP)
            out.append(float(topk_jsd(policy, teacher, K).mean()))
    return out


@pytest.mark.parametrize(("budget", "epochs"), [(10_000, 1), (8, 2)])
def test_internalisation_logged_through_the_learner(tiny: Any, learner_gradient: Any, budget: int, epochs: int) -> None:
    """One micro-batch, then several (token budget 8: 4 of them) with two epochs over them (the
    optimizer step is skipped, so both epochs see the same weights): the same JSD statistics, each action's JSD in
    its extras, and a mean over the 3 selected actions taken once (not a mean of means, not summed
    over epochs)."""
    samples = [s.model_copy(deep=True) for s in distill_samples()]
    ref = _reference_jsd(copy.deepcopy(tiny), samples)
    _, stats = learner_gradient(samples, Progress(3, 20), temperature=TEMP, token_budget=budget,
                                share_prompt_prefix=False, updates_per_batch=epochs, loss="reinforce",
                                objectives=[{"name": "auso_distill", "coef": COEF, "options": {"topk": K}}])
    assert (stats["micro_batches"] == 1) == (budget > 100)
    assert stats["auso/int_actions"] == 3.0 and stats["auso/int_skipped"] == 0.0
    assert stats["auso/int_jsd_mean"] == approx32(sum(ref) / 3)
    assert stats["auso/int_jsd_max"] == approx32(max(ref))
    assert [s.extras["auso_jsd"] for s in samples[:3]] == approx32(ref)
    assert all("auso_jsd" not in s.extras for s in samples[3:])
    weights = [s.extras["auso_weight"] for s in samples[:3]]
    # z-scored over the whole batch's three selected actions, however many micro-batches: mean 1
    assert sum(weights) / 3 == pytest.approx(1.0) and min(weights) < 1.0 < max(weights)
    assert weights == approx32(internalisation_weights(torch.tensor(ref), 0.2, 3 / 5).tolist())
    assert stats["auso/int_weight_mean"] == pytest.approx(sum(weights) / 3)
    assert stats["auso/w_int"] == pytest.approx(0.6 * (1 - (2 / 19 / 0.2) ** 2 * (3 - 2 * (2 / 19 / 0.2))))


def test_schedule_logged_at_every_step_and_utilisation_through_the_learner(learner_gradient: Any) -> None:
    terms = [{"name": "auso_distill", "coef": COEF, "options": {"topk": K}}, {"name": "auso_utilise", "options": {"topk": K}}]
    _, middle = learner_gradient(utilise_samples(), Progress(10, 20), temperature=TEMP, objectives=terms)
    assert middle["auso/w_int"] == 0.0 and middle["auso/w_util"] == 0.0  # GRPO stage: both logged, both 0
    assert not any(k.startswith(("auso/int_", "auso/util_")) for k in middle)
    samples = [s.model_copy(deep=True) for s in utilise_samples()]
    _, late = learner_gradient(samples, Progress(20, 20), temperature=TEMP, token_budget=8, objectives=terms)
    assert late["auso/w_util"] == 1.0 and late["auso/w_int"] == 0.0
    assert late["micro_batches"] > 1
    got = torch.tensor([s.extras["auso_jsd"] for s in samples[:6]], dtype=torch.float64)
    w = [s.extras["auso_weight"] for s in samples[:6]]
    assert "auso_jsd" not in samples[6].extras  # no no-skill probe
    assert late["auso/util_sensitivity_mean"] == pytest.approx(float(got.mean()))
    assert late["auso/util_sensitivity_std"] == pytest.approx(float(got.std(correction=0)))
    assert late["auso/util_weight_max"] == pytest.approx(max(w)) and late["auso/util_weight_mean"] == pytest.approx(1.0)
    assert late["auso/util_gate_mean"] == pytest.approx(4 * (1 / 3) * (2 / 3)) and late["auso/util_gate_zero_share"] == 0.0
    assert late["auso/util_m_max"] == pytest.approx(1.0) or late["auso/util_m_min"] == pytest.approx(-1.0)
    assert late["obj/auso_utilise/value_mean"] == pytest.approx(float(got.mean()))  # over the 6 with a value


def test_saved_turns_carry_the_action_jsd_and_weight() -> None:
    """The episode log: ``auso_jsd`` / ``auso_weight`` on the turn, and ``token_weights`` (what the
    viewer's "AUSO action weight" switch colours) = the sample's token weights x its action weight."""
    turns = [Turn(index=i, seat="agent_0", role="agent", phase="act", messages=[], completion="x",
                  prompt_ids=[1, 2], completion_ids=[3, 4], logprobs=[-0.5, -1.0], policy="learner") for i in range(3)]
    ep = Episode(episode_id="e0", game="household_v0", turns=turns)
    samples = {
        ("e0", 0): Sample(prompt_ids=[1, 2], completion_ids=[3, 4], advantage=0.5,
                          extras={"auso_jsd": 0.123456, "auso_weight": 1.15}),
        ("e0", 1): Sample(prompt_ids=[1, 2], completion_ids=[3, 4], advantage=0.5, token_weights=[1.0, 0.5],
                          extras={"auso_weight": 0.8}),
        ("e0", 2): Sample(prompt_ids=[1, 2], completion_ids=[3, 4], advantage=0.5),
    }
    raw = compact_episode(ep, samples)["turns"]
    assert raw[0]["auso_jsd"] == 0.1235 and raw[0]["auso_weight"] == 1.15 and raw[0]["token_weights"] == [1.15, 1.15]
    assert raw[1]["token_weights"] == [0.8, 0.4] and "auso_jsd" not in raw[1]
    assert raw[2]["token_weights"] is None and "auso_weight" not in raw[2]
