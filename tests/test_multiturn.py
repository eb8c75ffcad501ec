"""A 24-step multi-turn game whose prompts outgrow the context plays through hf and vLLM without
failing a batch; truncations are recorded and every occurrence of the repeated phase is kept."""

from __future__ import annotations

import pytest

from arena.runner import Runner
from arena.policies.base import SamplingParams
from arena.policies.hardware import resolve_dtype
from tests.fixtures.walk import WalkGame

MAX_LEN, BUDGET = 128, 8  # small, so the walk outgrows it fast and the test stays short
# The first prompt is 58 tokens and each step adds "Step i: <reply>" and a newline: with one-token
# replies the prompt passes MAX_LEN - BUDGET at turn 12, with 8-token replies at turn 6 (counted with
# the tokenizer); the turns after that play truncated.
TURNS = 14
pytestmark = pytest.mark.slow


def _play(policy) -> list:
    runner = Runner(lambda: WalkGame(max_turns=TURNS), {"p": policy}, sampling={"p": SamplingParams(max_new_tokens=BUDGET)}, num_envs=2)
    return runner.play([0, 1])


def _check(episodes, overflow: str) -> None:
    for ep in episodes:
        assert ep.truncated and ep.outcome == {}
        if overflow == "truncate":  # the prompt keeps its newest tokens; the step limit ends the game
            assert len(ep.turns) == TURNS and ep.info["truncation"] == f"step limit of {TURNS} turns"
            assert [t.phase_index for t in ep.turns] == list(range(TURNS))
            assert max(len(t.prompt_ids) for t in ep.turns) == MAX_LEN - BUDGET
            assert all(len(t.prompt_ids) + len(t.completion_ids) <= MAX_LEN for t in ep.turns)
        else:  # the first prompt that does not fit ends the game as a truncation
            assert 1 < len(ep.turns) < TURNS and "context length" in str(ep.info["truncation"])
        assert all(t.finish_reason in ("stop", "length") for t in ep.turns)


@pytest.mark.parametrize("overflow", ["truncate", "end"])
def test_walk_through_hf(overflow: str) -> None:
    from arena.policies.hf import HFPolicy

    policy = HFPolicy("smollm2-135m", dtype=resolve_dtype("auto"), max_model_len=MAX_LEN, overflow=overflow, name="p")
    _check(_play(policy), overflow)


@pytest.mark.vllm
def test_walk_through_vllm() -> None:
    pytest.importorskip("vllm", reason="vLLM is not installed")
    from arena.policies.vllm import VLLMPolicy

    policy = VLLMPolicy("smollm2-135m", dtype=resolve_dtype("auto"), max_model_len=MAX_LEN, kv_cache_gb=1, name="p")
    _check(_play(policy), "truncate")
    policy.overflow = "end"
    _check(_play(policy), "end")
