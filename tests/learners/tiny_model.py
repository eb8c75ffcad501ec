"""Helpers for exact gradient tests on a tiny randomly initialised Llama (fast, no download)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

VOCAB = 64
PAD = 0

def tiny_llama(seed: int = 0) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, pad_token_id=PAD,
    )
    model = LlamaForCausalLM(cfg).float()
    # Random init gives near-uniform logits; a larger head makes distributions peaked and
    # top-k choices meaningful.
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    return model


def flat_grad(model: Any) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def seq_log_softmax(model: Any, prompt: Sequence[int], completion: Sequence[int], temperature: float = 1.0) -> torch.Tensor:
    """Reference: one unpadded sequence; log-softmax at each completion position. ``-> (t, V)``."""
    ids = torch.tensor([list(prompt) + list(completion)])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits / temperature, dim=-1)
