"""Runs inside vLLM's worker: receives the learner's weights after each update.

Named in ``LLM(worker_extension_cls="policies.vllm_worker.WeightSync")``; the
policy calls ``llm.collective_rpc("arena_load_weights", args=(weights,))``, so
no function objects are pickled (no ``VLLM_ALLOW_INSECURE_SERIALIZATION``).
"""

from __future__ import annotations

from typing import Any

import torch


class WeightSync:
    """Mixed into vLLM's worker class; ``self.model_runner`` is the worker's."""

    model_runner: Any

    def arena_load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> int:
        """Replace weights in place from (HF parameter name, tensor) pairs; returns how many."""
        model = self.model_runner.model
        model.load_weights(weights=iter(weights))
        return len(weights)

    def arena_weight_checksum(self, name_fragment: str) -> float:
        """Sum of the first parameter whose name contains ``name_fragment`` (tests)."""
        for name, param in self.model_runner.model.named_parameters():
            if name_fragment in name:
                return float(param.detach().float().sum())
        raise KeyError(name_fragment)
