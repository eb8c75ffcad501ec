"""Activation checkpointing (arena/learners/recompute.py) on the tiny random Llama: the same log-probs and the
same gradient of every parameter, bit for bit, in each layout the learner runs (a plain forward, a shared
prefix run once on a cache, repeated prompts run once), with a fraction of the activations kept."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from test_prefix import kuhn_like, repeated_prompts
from tiny_model import PAD

from arena.learners.batch import MicroBatch, collate, completion_log_softmax
from arena.learners.recompute import checkpoint_layers, decoder_layers

Layout = Callable[[], tuple[MicroBatch, bool]]


def plain() -> tuple[MicroBatch, bool]:
    samples = kuhn_like()
    return collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=10_000), False


def shared_prefix() -> tuple[MicroBatch, bool]:
    samples = kuhn_like()[:-1]  # its last row repeats a prompt
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=1)
    assert mb.prefix_len > 0 and mb.prompt_of is None  # the rules run once, the rows on their cache
    return mb, True


def repeated() -> tuple[MicroBatch, bool]:
    samples = repeated_prompts()
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=1)
    assert mb.prompt_of is not None and mb.prefix_len > 0  # the cache is selected per row, then extended
    return mb, True


def loss_and_grads(model: Any, mb: MicroBatch, share: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    logp = completion_log_softmax(model, mb, 0.7, share).gather(-1, mb.completion_ids[..., None]).squeeze(-1)
    weights = torch.linspace(0.5, 1.5, logp.numel()).view_as(logp) * mb.completion_mask
    (logp * weights).sum().backward()
    return logp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("layout", [plain, shared_prefix, repeated], ids=lambda f: f.__name__)
def test_checkpointed_layers_give_the_same_values_and_gradients(tiny: Any, layout: Layout) -> None:
    mb, share = layout()
    whole = copy.deepcopy(tiny).train()
    recomputed = copy.deepcopy(tiny).train()
    assert checkpoint_layers(recomputed) == 2 == len(decoder_layers(recomputed))
    logp, grads = loss_and_grads(whole, mb, share)
    logp_c, grads_c = loss_and_grads(recomputed, mb, share)
    assert torch.equal(logp_c, logp)
    assert grads_c.keys() == grads.keys()
    for name, g in grads.items():
        assert torch.equal(grads_c[name], g), name


def saved_bytes(model: Any, mb: MicroBatch, share: bool) -> int:
    """Bytes of the tensors autograd keeps for the backward pass of one forward."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        completion_log_softmax(model, mb, 0.7, share)
    return total


def test_a_checkpointed_forward_keeps_a_fraction_of_the_activations(tiny: Any) -> None:
    mb, _ = plain()
    whole = copy.deepcopy(tiny).train()
    recomputed = copy.deepcopy(tiny).train()
    checkpoint_layers(recomputed)
    checkpoint_layers(recomputed)  # idempotent: one checkpoint per layer, not two
    kept, kept_c = saved_bytes(whole, mb, False), saved_bytes(recomputed, mb, False)
    assert kept_c < kept / 2, (kept_c, kept)


def test_passes_without_gradients_are_left_alone(tiny: Any) -> None:
    mb, share = shared_prefix()
    recomputed = copy.deepcopy(tiny).train()
    checkpoint_layers(recomputed)
    with torch.no_grad():
        assert torch.equal(completion_log_softmax(recomputed, mb, 0.7, share), completion_log_softmax(tiny, mb, 0.7, share))
    assert saved_bytes(recomputed, mb, share) > 0
    with torch.no_grad():
        assert saved_bytes(recomputed, mb, share) == 0


def test_a_copy_of_a_checkpointed_model_runs_its_own_weights(tiny: Any) -> None:
    """copy.deepcopy of a checkpointed model (as a reference or a bf16 copy is made) computes with the copy's
    weights: a wrapper closed over the original layer's forward ran the original's (in bf16: a dtype error)."""
    mb, share = plain()
    checked = copy.deepcopy(tiny).train()
    checkpoint_layers(checked)
    twin = copy.deepcopy(checked)
    with torch.no_grad():
        for p in twin.model.layers.parameters():
            p.mul_(0.5)
        moved = completion_log_softmax(twin, mb, 0.7, share)
        for p in tiny.model.layers.parameters():
            p.mul_(0.5)
        assert torch.equal(moved, completion_log_softmax(tiny, mb, 0.7, share))
        for p in tiny.model.layers.parameters():
            p.mul_(2.0)
    half = copy.deepcopy(checked).to(torch.bfloat16)
    with torch.no_grad():
        expected = completion_log_softmax(copy.deepcopy(tiny).to(torch.bfloat16), mb, 0.7, share)
        assert torch.equal(completion_log_softmax(half, mb, 0.7, share), expected)


@pytest.mark.parametrize("share", [False, True])
def test_the_learner_step_is_the_same_with_and_without_it(learner_gradient: Any, share: bool) -> None:
    samples = repeated_prompts()
    cfg = dict(loss="reinforce", token_budget=10_000, share_prompt_prefix=share, share_prefix_min_tokens=1)
    g_whole, _ = learner_gradient(samples, activation_checkpointing=False, **cfg)
    g_recomputed, _ = learner_gradient(samples, activation_checkpointing=True, **cfg)
    assert torch.equal(g_recomputed, g_whole)
