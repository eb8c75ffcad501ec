"""The transformers backend on the real built-in model (slow: loads SmolLM2-135M)."""

from __future__ import annotations

import pytest
import torch

from arena.policies.base import Request, SamplingParams
from arena.policies.hf import HFPolicy, sampling_logprobs
from tolerance import close32

pytestmark = pytest.mark.slow


def _requests(n: int, params: SamplingParams) -> list[Request]:
    return [
        Request(messages=[{"role": "user", "content": f"Name {k + 2} fruits, then stop."}], params=params, seed=100 + k)
        for k in range(n)
    ]


SAMPLINGS = {"t1": SamplingParams(temperature=1.0, max_new_tokens=24),
             "t0.7-p0.9": SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=24),
             "greedy": SamplingParams(temperature=0.0, max_new_tokens=24)}


def test_logprobs_match_teacher_forced_forward(smol_fp32) -> None:
    # One generate call holds every sampling mode (two requests each), as a runner's batch does.
    requests = [r for params in SAMPLINGS.values() for r in _requests(2, params)]
    completions = smol_fp32.generate(requests)
    for name, params in SAMPLINGS.items():
        worst = 0.0
        for req, comp in zip(requests, completions, strict=True):
            if req.params != params:
                continue
            assert len(comp.logprobs) == len(comp.completion_ids) > 0
            forced = smol_fp32.score(comp.prompt_ids, comp.completion_ids, params)
            worst = max(worst, max(abs(a - b) for a, b in zip(forced, comp.logprobs, strict=True)))
            assert all(lp <= 0.0 for lp in comp.logprobs)
        print(f"max |generate logprob - teacher-forced logprob| = {worst:.2e} ({name})")
        assert worst < 1e-3, name


def test_same_seeds_same_completions_and_eos_is_kept(smol_fp32) -> None:
    params = SamplingParams(temperature=1.0, max_new_tokens=40)
    a = smol_fp32.generate(_requests(4, params))
    b = smol_fp32.generate(_requests(4, params))
    assert [c.completion_ids for c in a] == [c.completion_ids for c in b]
    for comp in a:
        if comp.finish_reason == "stop":
            assert comp.completion_ids[-1] in smol_fp32.eos_ids
        else:
            assert len(comp.completion_ids) == 40


def test_stop_strings_cut_the_text(smol_fp32) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=30, stop=(",",))
    req = Request(messages=[{"role": "user", "content": "List five colours separated by commas."}], params=params)
    (comp,) = smol_fp32.generate([req])
    assert "," not in comp.text
    assert comp.finish_reason in ("stop", "length")


def test_left_padding_does_not_change_greedy_output(smol_fp32) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    short = Request(messages=[{"role": "user", "content": "Hi"}], params=params)
    long = Request(messages=[{"role": "user", "content": "Explain in detail how a bicycle gear works. " * 3}], params=params)
    alone = smol_fp32.generate([short])[0]
    batched = smol_fp32.generate([short, long])[0]
    assert alone.completion_ids == batched.completion_ids


def test_one_call_gives_each_request_its_own_sampling(smol_fp32) -> None:
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4, stop=(" ",))
    sampled = SamplingParams(temperature=1.0, max_new_tokens=12)
    short = Request(messages=[{"role": "user", "content": "Say hello to the world."}], params=greedy)
    story = Request(messages=[{"role": "user", "content": "Tell me a long story about a fox."}], params=sampled, seed=3)
    a, b = smol_fp32.generate([short, story])
    assert 0 < len(a.completion_ids) <= 4 and " " not in a.text
    assert 4 < len(b.completion_ids) <= 12, "the sampled request is not capped by the greedy one's budget"
    assert a.finish_reason == "stop" or len(a.completion_ids) == 4
    assert b.finish_reason == "stop" or len(b.completion_ids) == 12
    (alone,) = smol_fp32.generate([short])
    assert (alone.completion_ids, alone.text) == (a.completion_ids, a.text)
    (again,) = smol_fp32.generate([story])
    assert again.completion_ids == b.completion_ids


def _long_request(params: SamplingParams) -> Request:
    text = " ".join(f"item {k}," for k in range(60)) + " Which item came last?"
    return Request(messages=[{"role": "user", "content": text}], params=params)


def test_prompts_over_the_context_are_truncated_without_failing_the_batch(smol_fp32) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    small = HFPolicy(smol_fp32.model, smol_fp32.tokenizer, max_model_len=96, name="small")
    assert smol_fp32.max_model_len == smol_fp32.model.config.max_position_embeddings == 8192
    short, long = Request(messages=[{"role": "user", "content": "Hi"}], params=params), _long_request(params)
    full = small.encode(long)
    assert len(full) > 96 and len(small.encode(short)) + 8 <= 96
    a, b = small.generate([short, long])
    assert not a.prompt_truncated and a.completion_ids == smol_fp32.generate([short])[0].completion_ids
    assert b.prompt_truncated and b.prompt_ids == full[-(96 - 8) :]
    assert len(b.prompt_ids) + len(b.completion_ids) <= 96 and b.finish_reason in ("stop", "length")
    assert b.completion_ids == smol_fp32.generate_ids([b.prompt_ids], params)[0].completion_ids


def test_prompts_over_the_context_end_with_an_overflow_completion(smol_fp32) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    small = HFPolicy(smol_fp32.model, smol_fp32.tokenizer, max_model_len=96, overflow="end", name="small")
    short = Request(messages=[{"role": "user", "content": "Hi"}], params=params)
    a, b, c = small.generate([short, _long_request(params), short])
    assert a.completion_ids and a.completion_ids == c.completion_ids and a.finish_reason in ("stop", "length")
    assert (b.text, b.prompt_ids, b.completion_ids, b.finish_reason) == ("", [], [], "overflow")
    with pytest.raises(ValueError, match="overflow must be one of"):
        HFPolicy(smol_fp32.model, smol_fp32.tokenizer, overflow="drop")  # type: ignore[arg-type]


def test_top_p_transform_keeps_the_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    logp = sampling_logprobs(logits, SamplingParams(temperature=1.0, top_p=0.8))
    kept = torch.isfinite(logp[0]).tolist()
    assert kept == [True, True, False, False]
    close32(logp[0, :2].exp(), torch.tensor([0.625, 0.375]))
