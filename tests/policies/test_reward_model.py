"""Reward-model policies on a tiny reward model built from the built-in model (slow: loads SmolLM2-135M).

The reward model is the real SmolLM2-135M body with a one-label score head
initialised from a fixed seed, saved to a folder and loaded back by path, as a
user's reward model would be.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from arena.policies.base import Request
from arena.policies.reward_model import RewardModelPolicy
from tolerance import approx32

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rm_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from arena.core.models import resolve_model

    base = resolve_model("smollm2-135m")
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    torch.nn.init.normal_(model.score.weight, std=0.05, generator=torch.Generator().manual_seed(0))
    model.config.pad_token_id = None  # the policy must fill it in
    folder = tmp_path_factory.mktemp("tiny-rm")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def rm(rm_folder: Path) -> RewardModelPolicy:
    return RewardModelPolicy(str(rm_folder), max_batch_size=16)


def _judge(answer: str, question: str = "What is the capital of France?") -> Request:
    return Request(messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}])


ANSWERS = [
    "Paris.", "The capital of France is Paris, a city on the Seine.", "Berlin.", "I don't know.", "Lyon, I think",
]


def test_scores_are_finite_floats_that_the_text_carries(rm: RewardModelPolicy) -> None:
    assert rm.model.config.pad_token_id == rm.tokenizer.pad_token_id is not None
    out = rm.generate([_judge(a) for a in ANSWERS])
    assert len(out) == len(ANSWERS)
    for comp in out:
        assert isinstance(comp.score, float) and math.isfinite(comp.score)
        assert float(comp.text) == comp.score
        assert comp.finish_reason == "stop" and not comp.prompt_truncated and comp.prompt_ids
    assert len({c.score for c in out}) == len(ANSWERS), "different answers, different scores"


def test_batched_scores_equal_one_at_a_time_scores(rm: RewardModelPolicy) -> None:
    batched = [c.score for c in rm.generate([_judge(a) for a in ANSWERS])]
    alone = [rm.generate([_judge(a)])[0].score for a in ANSWERS]
    worst = max(abs(a - b) for a, b in zip(batched, alone, strict=True))  # type: ignore[operator]
    print(f"max |batched score - single score| = {worst:.2e}")
    assert worst < 1e-4


def test_the_same_input_gets_the_same_score(rm: RewardModelPolicy) -> None:
    batch = [_judge("Paris."), _judge("Berlin."), _judge("Paris.")]
    first = [c.score for c in rm.generate(batch)]
    assert first[0] == first[2] != first[1]
    assert [c.score for c in rm.generate(batch)] == first, "the same batch again: the very same floats"


def test_overlong_chats_keep_their_last_tokens(rm: RewardModelPolicy) -> None:
    short = RewardModelPolicy(rm.model, rm.tokenizer, max_length=48)
    question = "Consider these cities: " + ", ".join(f"city {k}" for k in range(40)) + ". Which is the capital?"
    (comp,) = short.generate([_judge("Paris.", question)])
    full = rm.encode(_judge("Paris.", question).messages)[0]
    assert comp.prompt_truncated and comp.prompt_ids == full[-48:]
    assert comp.score == approx32(rm.score_ids([full[-48:]])[0])


def test_label_index_is_checked(rm: RewardModelPolicy) -> None:
    with pytest.raises(ValueError, match=r"label_index must be in \[0, 1\) for this model, got 1"):
        RewardModelPolicy(rm.model, rm.tokenizer, label_index=1)
