"""Activation checkpointing of the learner's decoder layers, correct beside a KV cache (issue #54).

A backward pass keeps what every layer saved in its forward: for the built-in model in float32 about
46 KB per token per layer, 1.4 MB per token over its 30 layers, so a micro-batch of ``token_budget``
4096 tokens held 5.5 GB, the largest part of ``make train``'s peak (bench/RESULTS.md). Checkpointed,
a layer keeps its input alone (576 floats a token) and runs its forward again in the backward pass:
the same values (the same kernels on the same inputs), one more forward per micro-batch.

transformers' own ``gradient_checkpointing_enable`` drops ``past_key_values`` in training
(``GradientCheckpointingLayer``), because a layer that writes its cache would write it again when it
runs again. The learner's shared-prefix passes (arena/learners/batch.py ``after_prefix``,
``distinct_prompt_logits``) run the prompt's rows on a cache, so that would silently give other
logits. Here each layer's call remembers the cache's state (every cache layer's attributes, shallow)
as it was when the layer was called, and the recomputation starts from that state, so the layer reads
and writes in its recomputation exactly what it read and wrote the first time. Calls without
gradients (the reference's and the old policy's passes, generation) run as before.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

CACHE_KWARGS = ("past_key_values", "past_key_value")


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The model's repeated blocks: transformers' ``GradientCheckpointingLayer`` instances (every decoder
    layer of its causal LMs, inside a peft wrapper too); [] for a model without them."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # transformers before 4.52: no such base class, nothing checkpointed
        return []
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def checkpoint_layers(model: Any) -> int:
    """Checkpoint every decoder layer of ``model`` (:func:`decoder_layers`) while gradients are on; returns how
    many. Idempotent: a layer already checkpointed is left as it is. The wrapper is a method bound to its layer
    (not a closure over the layer's own ``forward``), so a ``copy.deepcopy`` of the model runs its own weights."""
    layers = decoder_layers(model)
    for layer in layers:
        if getattr(layer, "_arena_checkpointed", False):
            continue
        layer.forward = types.MethodType(_checkpointed_forward, layer)  # nn.Module.__call__ calls it
        layer._arena_checkpointed = True
    return len(layers)


def _checkpointed_forward(layer: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    forward = type(layer).forward.__get__(layer)
    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)
    cache = next((kwargs[k] for k in CACHE_KWARGS if kwargs.get(k) is not None), None)
    state = cache_state(cache)

    def again(*inputs: Any) -> Any:
        restore(cache, state)
        return forward(*inputs, **kwargs)

    return checkpoint(again, *args, use_reentrant=False)


def cache_state(cache: Any) -> tuple[list[Any], list[dict[str, Any]]] | None:
    """What a layer's call found in the cache: its list of layers (transformers' ``DynamicCache`` may append
    one as a layer first writes) and a shallow copy of each one's attributes (``keys``, ``values``, its flags).
    None: no cache."""
    if cache is None:
        return None
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        raise TypeError(f"activation checkpointing: a {type(cache).__name__} cache has no list of layers to "
                        "restore; set learner.activation_checkpointing: false")
    return list(layers), [dict(vars(layer)) for layer in layers]


def restore(cache: Any, state: tuple[list[Any], list[dict[str, Any]]] | None) -> None:
    """Put the cache back as :func:`cache_state` found it (a recomputation then appends what the first run did)."""
    if cache is None or state is None:
        return
    layers, attributes = state
    cache.layers[:] = layers
    for layer, saved in zip(layers, attributes, strict=True):
        vars(layer).clear()
        vars(layer).update(saved)
