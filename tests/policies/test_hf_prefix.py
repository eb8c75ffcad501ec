"""Prefix sharing in the transformers backend (arena/policies/hf_prefix.py): a prompt repeated in one
batch is prefilled once and its KV cache copied to its rows; the completions are those of the
unshared path (same tokens, logprobs within 1e-5 + 5e-6 relative in float32), row by row, seed by seed.

Fast: a tiny random Llama with a word-level tokenizer (EOS and stop strings come often) and a
tiny random model with SmolLM2's real tokenizer and chat template; one cheap check on the
built-in model (slow).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.policies.base import Request, SamplingParams
from arena.policies.hf import HFPolicy
from arena.policies.hf_prefix import dedupe

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learners"))
from test_hf_batch import tiny_tokenizer  # noqa: E402
from test_league import tiny_model  # noqa: E402, F401  (fixture: 2-layer random model, SmolLM2's tokenizer)
from tiny_model import tiny_llama  # noqa: E402


@given(st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=8))
def test_dedupe_rebuilds_the_batch_from_distinct_prompts(prompts: list[list[int]]) -> None:
    distinct, index = dedupe(prompts)
    assert [distinct[i] for i in index] == prompts
    assert distinct == [p for k, p in enumerate(prompts) if p not in prompts[:k]], "distinct, in first-seen order"


def pair(model, tokenizer, **kwargs) -> tuple[HFPolicy, HFPolicy]:
    """The same weights behind a sharing and a non-sharing policy."""
    make = lambda share: HFPolicy(model, tokenizer, max_model_len=128, prefix_sharing=share, **kwargs)  # noqa: E731
    return make(True), make(False)


def assert_same(shared, plain) -> None:  # noqa: ANN001
    assert len(shared) == len(plain)
    for k, (a, b) in enumerate(zip(shared, plain, strict=True)):
        assert a.completion_ids == b.completion_ids, k
        # float32 sums of other shapes: 1.3e-5 apart on a -5.75 logprob with one thread on the built-in model
        assert a.logprobs == pytest.approx(b.logprobs, rel=5e-6, abs=1e-5), k
        assert (a.text, a.finish_reason, a.prompt_ids) == (b.text, b.finish_reason, b.prompt_ids), k


def words(text: str, seed: int | None, params: SamplingParams) -> Request:
    return Request(messages=[{"role": "user", "content": text}], params=params, seed=seed)


# Duplicates in every length class, singletons among them, seeded and unseeded rows.
PROMPTS = ["w10 w11 w12", "w20 w21", "w10 w11 w12", "w30 w31 w32 w33 w34 w35", "w20 w21", "w10 w11 w12",
           "w40", "w30 w31 w32 w33 w34 w35", "w50 w51 w52 w53"]
SEEDS = [1, 2, 3, 4, None, None, 7, 8, 9]


@pytest.mark.parametrize(("params", "per_request_rng"), [
    (SamplingParams(temperature=1.0, max_new_tokens=12), True),
    (SamplingParams(temperature=1.0, max_new_tokens=12), False),
    (SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=12, stop=("w7", "w9 w9")), True),
    (SamplingParams(temperature=0.0, max_new_tokens=8), True),
], ids=["t1", "t1-rng-per-batch", "top-p-stop", "greedy"])
def test_shared_prefill_gives_the_unshared_completions(params: SamplingParams, per_request_rng: bool) -> None:
    shared, plain = pair(tiny_llama(seed=3), tiny_tokenizer(), per_request_rng=per_request_rng)
    reqs = [words(p, s, params) for p, s in zip(PROMPTS, SEEDS, strict=True)]
    a, b = shared.generate(reqs), plain.generate(reqs)
    assert_same(a, b)
    assert shared.prefill_rows_saved == 4 and plain.prefill_rows_saved == 0
    if params.stop:  # the case exercises early stops: EOS and stop strings end rows before the budget
        assert any(c.finish_reason == "stop" and len(c.completion_ids) < 12 for c in a)


def test_early_eos_and_stop_strings_really_happen_among_shared_rows() -> None:
    """Many draws of one duplicated prompt: rows end by EOS, by a stop string and by the budget,
    and the batch (whose cache shrinks as they end) still matches the unshared path."""
    params = SamplingParams(temperature=1.0, max_new_tokens=10, stop=("w5",))
    shared, plain = pair(tiny_llama(seed=4), tiny_tokenizer())
    reqs = [words("w10 w11 w12", 100 + k, params) for k in range(24)] + [words("w20", 200 + k, params) for k in range(8)]
    a, b = shared.generate(reqs), plain.generate(reqs)
    assert_same(a, b)
    eos = [c for c in a if c.completion_ids and c.completion_ids[-1] == 2]
    stopped = [c for c in a if c.finish_reason == "stop" and c.completion_ids[-1] != 2]
    full = [c for c in a if c.finish_reason == "length"]
    assert eos and stopped and full, (len(eos), len(stopped), len(full))
    assert len({tuple(c.completion_ids) for c in a[:24]}) > 12, "each copy of the prompt samples its own completion"
    assert shared.prefill_rows_saved == 30


def test_a_duplicated_prompt_samples_as_it_does_alone() -> None:
    """Per-row RNG stays per row: a request among copies of its prompt equals the request alone."""
    params = SamplingParams(temperature=1.0, max_new_tokens=10)
    shared, _ = pair(tiny_llama(seed=3), tiny_tokenizer())
    batch = shared.generate([words("w10 w11 w12", s, params) for s in (5, 6, 7, 5)])
    for k, s in enumerate((5, 6, 7, 5)):
        assert batch[k].completion_ids == shared.generate([words("w10 w11 w12", s, params)])[0].completion_ids
    assert batch[0].completion_ids == batch[3].completion_ids != batch[1].completion_ids


def test_with_smollm2_tokenizer_and_chat_template(tiny_model: Path) -> None:  # noqa: F811
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model).float().eval()
    shared, plain = pair(model, AutoTokenizer.from_pretrained(tiny_model), max_batch_size=8)
    params = SamplingParams(temperature=1.0, max_new_tokens=6, stop=("e",))
    texts = ["What is 47 + 18?", "Name a colour.", "What is 47 + 18?", "What is 47 + 18?", "Name a colour.", "Hi"]
    reqs = [Request(messages=[{"role": "user", "content": t}], params=params, seed=k) for k, t in enumerate(texts)]
    a, b = shared.generate(reqs), plain.generate(reqs)
    assert_same(a, b)
    # max_batch_size 8 < rows: the planner splits the 12 rows; duplicates that land together share
    reqs = reqs * 2
    assert_same(shared.generate(reqs), plain.generate(reqs))
    assert shared.prefill_rows_saved > 3


@pytest.mark.slow
def test_built_in_model_shared_equals_unshared(smol_fp32) -> None:
    """SmolLM2-135M in float32: four copies of a prompt and another prompt, 6 tokens each."""
    params = SamplingParams(temperature=1.0, max_new_tokens=6)
    reqs = [Request(messages=[{"role": "user", "content": t}], params=params, seed=k)
            for k, t in enumerate(["Name a fruit."] * 4 + ["Write one sentence about the sea."])]
    before = smol_fp32.prefix_sharing
    try:
        smol_fp32.prefix_sharing = True
        a = smol_fp32.generate(reqs)
        smol_fp32.prefix_sharing = False
        b = smol_fp32.generate(reqs)
    finally:
        smol_fp32.prefix_sharing = before
    assert_same(a, b)


def test_the_config_switch_reaches_the_policy(tiny_model: Path) -> None:  # noqa: F811
    from arena.loop.build import build_policies
    from arena.loop.config import load_config

    root = Path(__file__).resolve().parents[2]
    for value in (True, False):
        cfg = load_config(root / "arena/games/lsp/lsp.yaml", [f"policies.learner.model={tiny_model}",
                                                        f"policies.learner.prefix_sharing={str(value).lower()}"])
        assert build_policies(cfg, ["learner"])["learner"].prefix_sharing is value


@pytest.mark.parametrize("per_request_rng", [True, False])
def test_a_common_prefix_of_different_prompts_runs_once_in_generate(per_request_rng: bool) -> None:
    """Prompts that open with the same rules and then differ (Kuhn's seats): the rules run once, the
    completions equal the unshared path's, and the tokens saved are counted."""
    from arena.policies.hf_prefix import MIN_SHARED

    rules = " ".join(f"w{k}" for k in range(10, 10 + MIN_SHARED + 4))
    params = SamplingParams(temperature=1.0, max_new_tokens=8, stop=("w7",))
    tails = ["w60", "w61 w62", "w63 w64 w65", "w60", "w66 w67 w68 w69"]
    shared, plain = pair(tiny_llama(seed=5), tiny_tokenizer(), per_request_rng=per_request_rng)
    reqs = [words(f"{rules} {t}", 30 + k, params) for k, t in enumerate(tails)]
    a, b = shared.generate(reqs), plain.generate(reqs)
    assert_same(a, b)
    assert shared.prefill_rows_saved == 1 and plain.prefill_tokens_shared == 0
    assert shared.prefill_tokens_shared >= (MIN_SHARED + 4) * 3  # 4 distinct prompts: the rules run once, not 4 times
