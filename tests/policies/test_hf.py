"""The transformers backend on the real built-in model (slow: loads SmolLM2-135M)."""

from __future__ import annotations

import pytest
import torch

from policies.base import Request, SamplingParams
from policies.hf import sampling_logprobs

pytestmark = pytest.mark.slow


def _requests(n: int, params: SamplingParams) -> list[Request]:
    return [
        Request(messages=[{"role": "user", "content": f"Name {k + 2} fruits, then stop."}], params=params, seed=100 + k)
        for k in range(n)
    ]


@pytest.mark.parametrize("params", [SamplingParams(temperature=1.0, max_new_tokens=24),
                                    SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=24),
                                    SamplingParams(temperature=0.0, max_new_tokens=24)], ids=["t1", "t0.7-p0.9", "greedy"])
def test_logprobs_match_teacher_forced_forward(smol_fp32, params: SamplingParams) -> None:
    completions = smol_fp32.generate(_requests(6, params))
    worst = 0.0
    for comp in completions:
        assert len(comp.logprobs) == len(comp.completion_ids) > 0
        forced = smol_fp32.score(comp.prompt_ids, comp.completion_ids, params)
        worst = max(worst, max(abs(a - b) for a, b in zip(forced, comp.logprobs, strict=True)))
        assert all(lp <= 0.0 for lp in comp.logprobs)
    print(f"max |generate logprob - teacher-forced logprob| = {worst:.2e} ({params})")
    assert worst < 1e-3


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


def test_top_p_transform_keeps_the_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    logp = sampling_logprobs(logits, SamplingParams(temperature=1.0, top_p=0.8))
    kept = torch.isfinite(logp[0]).tolist()
    assert kept == [True, True, False, False]
    assert torch.allclose(logp[0, :2].exp(), torch.tensor([0.625, 0.375]))
