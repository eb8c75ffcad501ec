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
from tolerance import LOGITS, approx32


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
        assert a.logprobs == approx32(b.logprobs, scale=LOGITS), k
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


def test_the_rules_prefix_is_reused_across_calls_until_the_weights_change() -> None:
    """Calls on the same weights (Kuhn's turns of one step): the second and later take the rules' keys and
    values from the first (``prefix_memo.reused``) and still equal the unshared path, in generation and in
    scoring. Each way arena changes weights (the learner's optimizer step, whose fused AdamW kernel does not
    count its writes by itself; a weight push or a checkpoint load, ``load_state_dict``; a parameter replaced;
    the learner's bf16-rounded scoring, written through ``.data``) makes the next call run its prefix again."""
    import torch

    from arena.core.types import Sample
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner
    from arena.learners.weights import rounded_weights
    from arena.policies.hf_prefix import MIN_SHARED

    rules = " ".join(f"w{k}" for k in range(10, 10 + MIN_SHARED + 6))  # the tails below: other words of the 64
    params = SamplingParams(temperature=1.0, max_new_tokens=5)
    model = tiny_llama(seed=9)
    tokenizer = tiny_tokenizer()
    shared = HFPolicy(model, tokenizer, max_model_len=128, reuse_prefix=True)
    plain = HFPolicy(model, tokenizer, max_model_len=128, prefix_sharing=False, reuse_prefix=True)
    assert plain.prefix_memo is None and HFPolicy(model, tokenizer, max_model_len=128).prefix_memo is None
    memo = shared.prefix_memo

    def turn(tails: list[str], seed: int) -> None:
        reqs = [words(f"{rules} {t}", seed + k, params) for k, t in enumerate(tails)]
        assert_same(shared.generate(reqs), plain.generate(reqs))

    turn(["w40", "w41 w42", "w43"], 0)
    assert memo.reused == 0, "the first call has nothing to reuse"
    turn(["w44 w45", "w46"], 10)
    assert memo.reused >= MIN_SHARED + 6, "the rules' positions came from the memo"
    # A longer common prefix (the rules and the same next word), then a shorter one: the match is partial.
    turn(["w50 w51", "w50 w52"], 20)
    reused = memo.reused
    turn(["w40", "w61"], 30)
    assert memo.reused > reused
    prompts, replies = [[1, 2, 3] * 8, [1, 2, 3] * 7 + [4]], [[5, 6], [7]]
    for _ in range(2):  # the scorer too: its second call takes its prefix from the first
        reused = memo.reused
        a, b = shared.score_rows(prompts, replies, params), plain.score_rows(prompts, replies, params)
        assert sum(a, []) == approx32(sum(b, []), scale=LOGITS)
    assert memo.reused > reused

    learner = Learner(model, LearnerConfig(lr=0.05, beta=0.0), pad_id=0)
    sample = Sample(prompt_ids=[1, 2, 3, 4], completion_ids=[5, 6], advantage=1.0)

    def rounded() -> None:
        with rounded_weights(model, "bfloat16"):
            turn(["w40", "w41 w42"], 70)  # on the rounded weights; the memo must not carry them out

    changes = {
        "learner step": lambda: learner.step([sample]),
        "load_state_dict": lambda: model.load_state_dict({k: v + 0.01 for k, v in model.state_dict().items()}),
        "replaced": lambda: setattr(model.model.norm, "weight", torch.nn.Parameter(model.model.norm.weight * 1.5)),
        "rounded": rounded,
    }
    for name, change in changes.items():
        turn(["w40", "w41 w42"], 40)  # the memo holds these weights' rules
        before = memo.reused
        change()
        turn(["w43", "w44 w45"], 50)  # equal to the unshared path: the memo was not used on other weights
        assert memo.reused == before, f"{name}: the memo was used on changed weights"
        turn(["w46", "w47"], 60)
        assert memo.reused > before, f"{name}: the new weights' prefix is reused in turn"


def test_a_memo_off_its_weights_or_its_tokens_gives_nothing() -> None:
    from arena.policies.hf_prefix import MIN_SHARED, PrefixMemo, weights_key

    model = tiny_llama(seed=2)
    memo = PrefixMemo()
    key = weights_key(model)
    assert memo.match(key, list(range(40))) == 0, "empty"
    memo.key, memo.tokens, memo.layers = key, tuple(range(40)), [("k", "v")]
    assert memo.match(key, list(range(40))) == 40
    assert memo.match(key, list(range(30)) + [99] * 10) == 30
    assert memo.match(key, list(range(MIN_SHARED - 1)) + [99] * 10) == 0, "a match shorter than MIN_SHARED is not worth it"
    assert memo.match(key, list(range(MIN_SHARED)) + [99]) == MIN_SHARED
    assert memo.match(weights_key(tiny_llama(seed=2)), list(range(40))) == 0, "another model, the same values"
