"""Objective terms: the registry, the JSD itself, and jsd_distill against a plain reference loop."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from pydantic import ValidationError
from tiny_model import flat_grad, seq_log_softmax

from arena.core.types import Sample
from arena.learners.config import LearnerConfig, ObjectiveConfig
from arena.learners.objectives import get_objective, jsd
from arena.learners.progress import Progress
from arena.learners.update import build_objectives
from arena.learners.update import pack
from tolerance import approx32, close32


def test_unknown_objective_and_bad_options_are_config_errors() -> None:
    with pytest.raises(ValueError, match="unknown objective 'jsd'; known: auso_distill, auso_utilise, jsd_distill"):
        get_objective("jsd")
    with pytest.raises(ValidationError, match="jsd_distill option topk=0: Input should be greater than or equal to 1"):
        LearnerConfig(objectives=[{"name": "jsd_distill", "options": {"topk": 0}}])
    with pytest.raises(ValidationError, match="jsd_distill: unknown option 'k'"):
        ObjectiveConfig(name="jsd_distill", options={"k": 3})
    cfg = ObjectiveConfig(name="jsd_distill", coef=0.5)
    assert cfg.options == {"probe": "teacher", "topk": 64}
    (key, term), (key2, _) = build_objectives([cfg, cfg])
    assert (key, key2) == ("obj/jsd_distill", "obj/jsd_distill#2") and term.probes == ("teacher",) and term.topk == 64


def test_jsd_hand_computed() -> None:
    p, q = [0.7, 0.2, 0.1], [0.1, 0.3, 0.6]
    m = [(a + b) / 2 for a, b in zip(p, q, strict=True)]
    expected = 0.5 * sum(a * math.log(a / c) for a, c in zip(p, m, strict=True)) + 0.5 * sum(
        b * math.log(b / c) for b, c in zip(q, m, strict=True)
    )
    got = jsd(torch.tensor(p).log(), torch.tensor(q).log())
    assert float(got) == pytest.approx(expected)
    assert float(jsd(torch.tensor(q).log(), torch.tensor(p).log())) == pytest.approx(expected), "symmetric"
    assert float(jsd(torch.tensor(p).log(), torch.tensor(p).log())) == approx32(0.0)


K, COEF, TEMP = 5, 0.7, 0.9


def distill_samples() -> list[Sample]:
    """Four samples: three with a teacher prompt (two share the student prompt), one without."""
    teacher = {"teacher": [20, 21, 22, 23, 24]}
    return [
        Sample(prompt_ids=[3, 4, 5], completion_ids=[9, 10, 11], advantage=0.0, probes=teacher),
        Sample(prompt_ids=[3, 4, 5], completion_ids=[12, 13], advantage=0.0, probes={"teacher": [30, 31]}),
        Sample(prompt_ids=[6, 7], completion_ids=[14, 15, 16, 17], advantage=0.0, probes=teacher),
        Sample(prompt_ids=[8], completion_ids=[18, 19], advantage=0.0),
    ]


def reference_jsd_loss(model: Any, samples: list[Sample]) -> torch.Tensor:
    """coef * mean over samples with the probe of the token mean of JSD over the teacher's top-k + tail."""
    per_sample = []
    for s in samples:
        if "teacher" not in s.probes:
            continue
        policy = seq_log_softmax(model, s.prompt_ids, s.completion_ids, TEMP).exp()
        with torch.no_grad():
            teacher = seq_log_softmax(model, s.probes["teacher"], s.completion_ids, TEMP).exp()
        token_jsd = []
        for t in range(len(s.completion_ids)):
            top = sorted(range(teacher.shape[-1]), key=lambda v: -float(teacher[t, v]))[:K]
            p = torch.stack([policy[t, v] for v in top] + [1 - sum(policy[t, v] for v in top)])
            q = torch.stack([teacher[t, v] for v in top] + [1 - sum(teacher[t, v] for v in top)])
            m = (p + q) / 2
            token_jsd.append(0.5 * (p * (p / m).log()).sum() + 0.5 * (q * (q / m).log()).sum())
        per_sample.append(torch.stack(token_jsd).mean())
    return COEF * torch.stack(per_sample).mean()


def objective_cfg() -> dict[str, Any]:
    return {"loss": "reinforce", "objectives": [{"name": "jsd_distill", "coef": COEF, "options": {"topk": K}}]}


def test_jsd_distill_value_and_gradient_equal_a_reference_loop(tiny: Any, learner_gradient: Any) -> None:
    samples = distill_samples()
    model = copy.deepcopy(tiny)
    expected = reference_jsd_loss(model, samples)
    expected.backward()
    # Zero advantages and beta 0: the policy-gradient part has no gradient, the term is all.
    grad, stats = learner_gradient(samples, Progress(1, 3), temperature=TEMP, token_budget=10_000, **objective_cfg())
    value = float(expected.detach())
    assert stats["obj/jsd_distill"] == approx32(value)
    assert value > 1e-3, "the teacher prompts change the distribution"
    close32(grad, flat_grad(model))


def test_jsd_distill_micro_batched_equals_full_batch(learner_gradient: Any) -> None:
    samples = distill_samples()
    longest = max(s.length for s in samples)
    assert len(pack(samples, 10_000, True)) < len(pack(samples, longest, True)) == 4
    whole, s_whole = learner_gradient(samples, temperature=TEMP, token_budget=10_000, **objective_cfg())
    split, s_split = learner_gradient(samples, temperature=TEMP, token_budget=longest, **objective_cfg())
    close32(whole, split)
    assert s_whole["obj/jsd_distill"] == approx32(s_split["obj/jsd_distill"])


def test_jsd_distill_adds_to_the_policy_gradient(learner_gradient: Any) -> None:
    samples = [s.model_copy(update={"advantage": a}) for s, a in zip(distill_samples(), [1.0, -0.5, 0.25, 2.0], strict=True)]
    rl, rl_stats = learner_gradient(samples, temperature=TEMP, loss="reinforce")
    only, _ = learner_gradient([s.model_copy(update={"advantage": 0.0}) for s in samples], temperature=TEMP, **objective_cfg())
    both, stats = learner_gradient(samples, temperature=TEMP, **objective_cfg())
    close32(both, rl + only)
    assert stats["loss"] == approx32(rl_stats["loss"] + stats["obj/jsd_distill"])


def test_samples_without_the_probe_give_zero(learner_gradient: Any) -> None:
    samples = [distill_samples()[3]]
    grad, stats = learner_gradient(samples, **objective_cfg())
    assert stats["obj/jsd_distill"] == 0.0 and float(grad.abs().max()) == 0.0
