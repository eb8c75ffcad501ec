"""The update step on the real built-in model (slow): parameters move, KL is 0 at the reference."""

from __future__ import annotations

import copy

import pytest
import torch

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.update import Learner, collate, completion_logprobs, pack
from arena.policies.base import Request, SamplingParams
from tolerance import approx32, close32

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def batch(smol_fp32) -> list[Sample]:
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    reqs = [Request(messages=[{"role": "user", "content": f"Count to {k}."}], params=params, seed=k) for k in range(4)]
    comps = smol_fp32.generate(reqs)
    return [
        Sample(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs, advantage=a)
        for c, a in zip(comps, [1.0, -1.0, 0.5, -0.5], strict=True)
    ]


def _fresh(smol_fp32):
    return copy.deepcopy(smol_fp32.model)


def test_pack_respects_the_token_budget(batch: list[Sample]) -> None:
    longest = max(s.length for s in batch)
    groups = pack(batch, token_budget=2 * longest)
    assert sorted(i for g in groups for i in g) == list(range(len(batch)))
    for g in groups:
        assert max(batch[i].length for i in g) * len(g) <= 2 * longest


def test_parameters_change_after_one_step(smol_fp32, batch: list[Sample]) -> None:
    model = _fresh(smol_fp32)
    before = {k: v.clone() for k, v in model.named_parameters()}
    learner = Learner(model, LearnerConfig(lr=1e-4, beta=0.0), smol_fp32.tokenizer.pad_token_id)
    stats = learner.step(batch)
    changed = [k for k, v in model.named_parameters() if not torch.equal(v, before[k])]
    assert len(changed) > 0.9 * len(before)
    assert stats["samples"] == 4 and stats["grad_norm"] > 0
    # The generator's logprobs and the learner's (same weights, same dtype) agree.
    assert stats["logprob_gap"] < 1e-3


def test_kl_is_zero_when_policy_equals_reference(smol_fp32, batch: list[Sample]) -> None:
    model, ref = _fresh(smol_fp32), _fresh(smol_fp32)
    learner = Learner(model, LearnerConfig(lr=1e-4, beta=0.1), smol_fp32.tokenizer.pad_token_id, ref_model=ref)
    first = learner.step(batch)
    assert first["kl"] == approx32(0.0)
    second = learner.step(batch)
    assert second["kl"] > 1e-6, "after an update the policy has moved away from the reference"


def _gradient(smol_fp32, batch: list[Sample], budget: int = 4096, share: bool = True) -> torch.Tensor:
    """The gradient one learner step accumulates (the optimizer step is skipped)."""
    model = _fresh(smol_fp32)
    cfg = LearnerConfig(lr=1e-4, beta=0.0, token_budget=budget, share_prompt_prefix=share)
    learner = Learner(model, cfg, smol_fp32.tokenizer.pad_token_id)
    captured: list[torch.Tensor] = []

    def capture() -> float:
        captured.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone())
        return 0.0

    learner._optimizer_step = capture  # type: ignore[method-assign]
    learner.step(batch)
    return captured[0]


def test_micro_batching_does_not_change_the_gradient(smol_fp32, batch: list[Sample]) -> None:
    longest = max(s.length for s in batch)
    assert len(pack(batch, 10_000)) == 1 and len(pack(batch, longest)) == len(batch)
    whole, split = _gradient(smol_fp32, batch, 10_000), _gradient(smol_fp32, batch, longest)
    close32(whole, split)


def test_completion_logprobs_shape(smol_fp32, batch: list[Sample]) -> None:
    mb = collate(batch, [0, 1], smol_fp32.tokenizer.pad_token_id, torch.device("cpu"))
    assert completion_logprobs(smol_fp32.model, mb, 1.0).shape == mb.completion_mask.shape


def test_deepspeed_backend_steps_on_cpu(smol_fp32, batch: list[Sample]) -> None:
    import os

    model = _fresh(smol_fp32)
    before = {k: v.clone() for k, v in model.named_parameters()}
    cfg = LearnerConfig(backend="deepspeed", lr=1e-4, beta=0.0)
    env = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    learner = Learner(model, cfg, smol_fp32.tokenizer.pad_token_id)
    # The one-rank process group leaves no rendezvous in the environment: a process started later
    # would inherit a port this one still holds (EADDRINUSE in test_multirank's forked DeepSpeed run).
    assert {k: os.environ.get(k) for k in env} == env
    stats = learner.step(batch)
    changed = sum(not torch.equal(v, before[k]) for k, v in learner.module.named_parameters())
    assert changed > 0.9 * len(before)
    assert stats["samples"] == 4


def _group(smol_fp32) -> list[Sample]:
    params = SamplingParams(temperature=1.0, max_new_tokens=10)
    reqs = [Request(messages=[{"role": "user", "content": "Name a fruit."}], params=params, seed=k) for k in range(4)]
    comps = smol_fp32.generate(reqs)
    return [Sample(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs, advantage=a)
            for c, a in zip(comps, [1.0, -0.5, 0.25, -0.75], strict=True)]


def test_shared_prompt_path_equals_the_plain_forward(smol_fp32) -> None:
    group = _group(smol_fp32)
    groups = pack(group, 10_000, share_prompts=True)
    assert groups == [sorted(groups[0], key=lambda i: -len(group[i].completion_ids))] and len(groups[0]) == 4
    mb = collate(group, groups[0], smol_fp32.tokenizer.pad_token_id, torch.device("cpu"))
    assert mb.shared_prompt
    with torch.no_grad():
        plain = completion_logprobs(smol_fp32.model, mb, 1.0, share_prompt=False)
        shared = completion_logprobs(smol_fp32.model, mb, 1.0, share_prompt=True)
    mask = mb.completion_mask.bool()
    close32(shared[mask], plain[mask])


def test_shared_prompt_gradient_equals_the_plain_gradient(smol_fp32) -> None:
    group = _group(smol_fp32)
    plain, shared = _gradient(smol_fp32, group, share=False), _gradient(smol_fp32, group, share=True)
    close32(shared, plain)
