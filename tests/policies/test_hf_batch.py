"""Batch independence of the transformers backend: a seeded request's completion does not
depend on which other requests share its batch (each request has its own generator).

Fast: a tiny randomly initialised Llama and a word-level tokenizer built in the test (no
download); the slow check on the built-in model is at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from arena.policies.base import Request, SamplingParams
from arena.policies.hf import HFPolicy, row_seeds

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learners"))
from tiny_model import VOCAB, tiny_llama  # noqa: E402
from tolerance import LOGITS, approx32

EOS = 2


def tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(VOCAB)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="w1"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="w0", eos_token=f"w{EOS}", unk_token="w1")
    # each message's content is a run of words; the reply starts after "w3"
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}w3"
    return tok


@pytest.fixture(scope="module")
def tiny_policy() -> HFPolicy:
    return HFPolicy(tiny_llama(seed=3), tiny_tokenizer(), name="tiny", max_model_len=128, per_request_rng=True)


SAMPLED = SamplingParams(temperature=1.0, max_new_tokens=10)


def req(words: str, seed: int | None, params: SamplingParams = SAMPLED) -> Request:
    return Request(messages=[{"role": "user", "content": words}], params=params, seed=seed)


A = "w10 w11 w12"
OTHERS = ["w20 w21", "w30 w31 w32 w33 w34 w35", "w40"]


def test_a_seeded_completion_does_not_depend_on_its_batch(tiny_policy: HFPolicy) -> None:
    alone = tiny_policy.generate([req(A, 7)])[0]
    assert len(alone.completion_ids) > 3
    for company, at in (([req(OTHERS[0], 1)], 0), ([req(o, k) for k, o in enumerate(OTHERS)], 3),
                        ([req(OTHERS[1], 7), req(OTHERS[2], None)], 1)):
        batch = [*company[:at], req(A, 7), *company[at:]]
        got = tiny_policy.generate(batch)[at]
        assert got.completion_ids == alone.completion_ids, (at, len(company))
        assert got.logprobs == approx32(alone.logprobs, scale=LOGITS)


def test_the_seed_still_matters_and_unseeded_rows_differ(tiny_policy: HFPolicy) -> None:
    by_seed = {tuple(c.completion_ids) for c in tiny_policy.generate([req(A, s) for s in range(4)])}
    assert len(by_seed) > 1, "different seeds sample different completions"
    twins = tiny_policy.generate([req(A, None)] * 3)
    assert len({tuple(c.completion_ids) for c in twins}) > 1, "unseeded requests of one batch get their own draws"
    again = tiny_policy.generate([req(A, None)] * 3)
    assert [c.completion_ids for c in again] == [c.completion_ids for c in twins], "and are reproducible"


def test_row_seeds_depend_only_on_the_requests_own_seed() -> None:
    assert row_seeds([5, 9])[0] == row_seeds([5])[0] == row_seeds([1, 2, 5])[2]
    assert row_seeds([5, 5]) == [row_seeds([5])[0]] * 2
    none = row_seeds([None, None, 3])
    assert none[0] != none[1] and none[2] == row_seeds([3])[0]
    assert all(0 <= s < 2**63 for s in none)


def test_with_one_generator_per_batch_only_the_same_batch_reproduces() -> None:
    """``per_request_rng=False`` (the behaviour before per-request generators): what holds is
    reproducibility for the same batch composition, not independence from it."""
    shared = HFPolicy(tiny_llama(seed=3), tiny_tokenizer(), name="tiny", max_model_len=128, per_request_rng=False)
    batch = [req(A, 7), *(req(o, k) for k, o in enumerate(OTHERS))]
    first = shared.generate(batch)
    assert [c.completion_ids for c in shared.generate(batch)] == [c.completion_ids for c in first]
    alone = shared.generate([req(A, 7)])[0]
    assert alone.completion_ids != first[0].completion_ids, "the batch's other seeds change the draws"


def test_generate_ids_takes_one_seed_per_row(tiny_policy: HFPolicy) -> None:
    prompts = [[10, 11, 12], [20, 21]]
    a = tiny_policy.generate_ids(prompts, SAMPLED, [11, 22])
    b = tiny_policy.generate_ids(prompts[::-1], SAMPLED, [22, 11])
    assert [c.completion_ids for c in a] == [c.completion_ids for c in b[::-1]]
    with pytest.raises(ValueError, match="2 seeds for 1 prompts"):
        tiny_policy.generate_ids(prompts[:1], SAMPLED, [1, 2])


@pytest.mark.slow
def test_built_in_model_batched_equals_one_at_a_time(smol_fp32) -> None:
    """The same on SmolLM2-135M (float32): a request alone and among others of different lengths."""
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    reqs = [Request(messages=[{"role": "user", "content": text}], params=params, seed=40 + k)
            for k, text in enumerate(["Name a fruit.", "Write one long sentence about the sea and ships.", "Hi"])]
    default, smol_fp32.per_request_rng = smol_fp32.per_request_rng, True
    try:
        batched = smol_fp32.generate(reqs)
        for r, b in zip(reqs, batched, strict=True):
            assert smol_fp32.generate([r])[0].completion_ids == b.completion_ids
    finally:
        smol_fp32.per_request_rng = default


# ------------------------------------------------------------ weight sync, with a "before sync" control
def test_weight_sync_is_what_closes_the_logprob_gap() -> None:
    """A generator holding its own copy of the weights: after a learner update its logprobs
    drift from the learner's (``logprob_gap`` grows) until ``push_weights`` (``Trainer.sync_weights``) copies them."""
    import copy
    from types import SimpleNamespace

    from arena.core.types import Sample
    from arena.loop.weights import push_weights
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    base = tiny_llama(seed=5)
    generator = HFPolicy(copy.deepcopy(base), tiny_tokenizer(), name="gen", max_model_len=128)
    learner = Learner(copy.deepcopy(base), LearnerConfig(lr=0.05, beta=0.0), pad_id=0)

    def rollout_gap(seed: int) -> float:
        comps = generator.generate([req(f"w{10 + k} w{20 + k}", seed + k) for k in range(4)])
        samples = [Sample(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs,
                          advantage=a) for c, a in zip(comps, [1.0, -1.0, 1.0, -1.0], strict=True)]
        return learner.step(samples)["logprob_gap"]

    first = rollout_gap(0)  # same weights: only float noise
    stale = rollout_gap(10)  # the learner moved at the first step; the generator did not
    unit = SimpleNamespace(generator=generator, learner=learner, adapter_sync=None, pushed=None)
    push_weights(unit)
    synced = rollout_gap(20)  # synced after the second step, measured before the third
    print(f"logprob_gap: equal weights {first:.2e}, before sync {stale:.3f}, after sync {synced:.2e}")
    assert first < 1e-4 and synced < 1e-4
    assert stale > 100 * max(synced, 1e-6), "without the sync the generator is stale"

    # The generator holds the learner's version: a sync with no optimizer step since pushes nothing
    # (a step that trained no sample costs no push); a new optimizer step, or ``force``, pushes again.
    push_weights(unit)  # the learner moved at the third step
    weight = next(generator.model.parameters())
    with torch.no_grad():
        weight.add_(1.0)  # a marker only a push would overwrite
    learner.step([])
    push_weights(unit)
    assert torch.equal(weight, next(learner.module.parameters()) + 1.0), "a no-sample step pushed weights"
    push_weights(unit, force=True)
    assert torch.equal(weight, next(learner.module.parameters()))
    with torch.no_grad():
        weight.add_(1.0)
    rollout_gap(30)
    push_weights(unit)
    assert torch.equal(weight, next(learner.module.parameters())), "an update was not pushed"
