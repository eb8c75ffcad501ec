"""LoRA in the learner (arena/learners/lora.py) on the tiny randomly initialised Llama: only adapters train,
an update moves only them, micro-batching changes nothing, and the merged weights are the adapted model."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_model import PAD, VOCAB

from arena.core.errors import ConfigError
from arena.core.types import Sample
from arena.loop.config import load_config
from arena.learners.config import LearnerConfig
from arena.learners.lora import adapter_state_dict, base_model, load_adapter_state, merged_state_dict
from arena.learners.update import Learner
from tolerance import apart, close32

ROOT = Path(__file__).resolve().parents[2]
LORA = {"r": 4, "alpha": 8.0, "target_modules": ["q_proj", "v_proj", "up_proj"]}


def _samples(n: int = 6) -> list[Sample]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(n):
        prompt = torch.randint(1, VOCAB, (3 + i % 3,), generator=g).tolist()
        comp = torch.randint(1, VOCAB, (2 + i % 4,), generator=g).tolist()
        out.append(Sample(prompt_ids=prompt, completion_ids=comp, advantage=(-1.0) ** i * (0.5 + i / 10)))
    return out


@pytest.mark.parametrize(("sets", "needle"), [
    (["learner.lora.r=0"], "learner.lora.r"),
    (["learner.lora.dropout=1.5"], "learner.lora.dropout"),
    (["learner.lora.target_modules=[]"], "learner.lora.target_modules"),
    (["learner.lora.target_modules=[all-linear, q_proj]"], "all-linear stands alone"),
    (["learner.lora.rank=4"], "learner.lora.rank"),
])
def test_bad_lora_config_is_one_line(sets: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "arena/games/spy/spy.yaml", sets)
    line = str(err.value)
    assert "\n" not in line and needle in line, line


def test_lora_config_defaults_from_one_key() -> None:
    cfg = load_config(ROOT / "arena/games/spy/spy.yaml", ["learner.lora.r=16"])
    assert cfg.learner.lora is not None and cfg.learner.lora.r == 16
    assert cfg.learner.lora.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert load_config(ROOT / "arena/games/spy/spy.yaml").learner.lora is None


def test_a_target_that_matches_no_layer_is_one_line(tiny: Any) -> None:
    cfg = LearnerConfig(lora={"target_modules": ["qq_proj"]}, beta=0.0)
    with pytest.raises(ValueError) as err:
        Learner(copy.deepcopy(tiny), cfg, PAD)
    assert "\n" not in str(err.value) and "learner.lora.target_modules: qq_proj match(es) no linear layer" in str(err.value)


def test_one_misspelt_target_among_valid_ones_is_one_line(tiny: Any) -> None:
    """peft refuses only when no name matches; one misspelt name among valid ones would train fewer layers silently."""
    cfg = LearnerConfig(lora={"target_modules": ["q_proj", "v_prj"]}, beta=0.0)
    with pytest.raises(ValueError, match=r"v_prj match\(es\) no linear layer"):
        Learner(copy.deepcopy(tiny), cfg, PAD)


def test_only_adapters_are_trainable_and_the_optimizer_holds_only_them(tiny: Any) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lora=LORA, beta=0.0), PAD)
    trained = [n for n, p in learner.module.named_parameters() if p.requires_grad]
    # 2 layers x 3 targets x (A, B)
    assert len(trained) == 12 and all(".lora_A." in n or ".lora_B." in n for n in trained)
    held = [p for group in learner.optimizer.param_groups for p in group["params"]]
    assert len(held) == 12 and all(p.requires_grad for p in held)
    n_adapter = sum(p.numel() for p in held)
    # q (32->32), v (32->16: 2 kv heads of 8), up (32->64), each r=4: A is 4 x in, B out x 4
    assert n_adapter == 2 * (4 * 32 + 32 * 4 + 4 * 32 + 16 * 4 + 4 * 32 + 64 * 4)


def test_a_lora_update_changes_only_adapter_weights(tiny: Any) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lora=LORA, lr=1e-2, beta=0.0), PAD)
    before = {n: p.detach().clone() for n, p in learner.module.named_parameters()}
    stats = learner.step(_samples())
    assert stats["grad_norm"] > 0
    changed = {n for n, p in learner.module.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(".lora_" in n for n in changed)
    assert {n for n in before if ".lora_B." in n} <= changed  # B starts at 0 and every B got a gradient
    # The merged weights differ from the base exactly by (alpha / r) B A.
    merged = merged_state_dict(learner.module)
    base = base_model(learner.module)
    q = base.model.layers[0].self_attn.q_proj
    delta = (q.lora_B["default"].weight @ q.lora_A["default"].weight) * (LORA["alpha"] / LORA["r"])
    torch.testing.assert_close(merged["model.layers.0.self_attn.q_proj.weight"], q.base_layer.weight + delta)
    assert not any("lora_" in k or "base_layer" in k for k in merged)


def test_merged_weights_give_the_adapted_model_logits(tiny: Any) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lora=LORA, lr=1e-2, beta=0.0), PAD)
    learner.step(_samples())
    plain = copy.deepcopy(tiny)
    plain.load_state_dict(merged_state_dict(learner.module))
    ids = torch.tensor([[5, 9, 11, 3, 7, 2]])
    with torch.no_grad():
        close32(plain(ids).logits, learner.module(input_ids=ids).logits)
        assert apart(tiny(ids).logits, plain(ids).logits, 1e-4)  # the adapter did move them


def _gradient(tiny: Any, budget: int) -> torch.Tensor:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(lora=LORA, lr=1e-2, beta=0.0, token_budget=budget), PAD)
    # B = 0 at the start makes A's gradient 0: a step first, so that every adapter weight has a gradient.
    learner.step(_samples())
    captured: list[torch.Tensor] = []

    def capture() -> float:
        captured.append(torch.cat([p.grad.flatten() for p in learner._trained()]).clone())
        learner.optimizer.zero_grad(set_to_none=True)
        return 0.0

    learner._optimizer_step = capture  # type: ignore[method-assign]
    learner.step(_samples())
    return captured[0]


def test_lora_micro_batched_gradient_equals_the_full_batch_gradient(tiny: Any) -> None:
    whole, split = _gradient(tiny, 10_000), _gradient(tiny, 8)
    assert whole.abs().max() > 0 and (whole[: whole.numel() // 4] != 0).any()
    # float32 sums in another order: 2.4e-7 apart on one element of 1664 on an AVX2 host; a wrong
    # normalisation moves every element by a share of its size.
    close32(whole, split)


def test_adapter_state_round_trips_exactly(tiny: Any) -> None:
    a = Learner(copy.deepcopy(tiny), LearnerConfig(lora=LORA, lr=1e-2, beta=0.0), PAD)
    a.step(_samples())
    b = Learner(copy.deepcopy(tiny), LearnerConfig(lora=LORA, lr=1e-2, beta=0.0), PAD)
    load_adapter_state(b.module, adapter_state_dict(a.module))
    for (n, p), (m, q) in zip(a.module.named_parameters(), b.module.named_parameters(), strict=True):
        assert n == m and torch.equal(p, q), n
    with pytest.raises(ValueError, match="adapter does not fit"):
        load_adapter_state(b.module, {"base_model.model.nope.lora_A.weight": torch.zeros(1)})


@pytest.mark.slow
def test_deepspeed_trains_only_the_adapters_on_cpu(tiny: Any) -> None:
    learner = Learner(copy.deepcopy(tiny), LearnerConfig(backend="deepspeed", lora=LORA, lr=1e-2, beta=0.0), PAD)
    before = {n: p.detach().clone() for n, p in learner.module.named_parameters()}
    learner.step(_samples())
    learner.step(_samples())
    changed = {n for n, p in learner.module.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(".lora_" in n for n in changed)
    assert {n for n in before if ".lora_A." in n} <= changed
