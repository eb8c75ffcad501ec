"""Runs inside vLLM's worker: receives the learner's weights after each update.

Named in ``LLM(worker_extension_cls="arena.policies.vllm_worker.WeightSync")``; the
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
        """Replace weights in place from (HF checkpoint name, tensor) pairs; returns how many.

        ``reload_weights`` runs the model's own loader again and then its
        post-load processing, which matters on CPU: vLLM repacks linear weights
        for oneDNN there and drops the originals, so writing into parameters
        directly would not reach the kernels.
        """
        self.model_runner.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
        return len(weights)

    def arena_load_weights_file(self, path: str, version: str | None = None) -> int:
        """The same from a safetensors file: how weights cross into an engine in another process, or
        into a server (``python -m arena.serve``, through vLLM's ``/collective_rpc``, whose arguments
        are strings). ``version``: the learner's update count, which :meth:`arena_weight_version` returns."""
        from safetensors.torch import load_file

        count = self.arena_load_weights(list(load_file(path).items()))
        if version is not None:
            self.arena_version = int(version)
        return count

    def arena_weight_version(self) -> int:
        """The version of the weights last loaded by :meth:`arena_load_weights_file` (0: as started). A
        restarted server answers 0, so the client knows to send the newest weights again."""
        return int(getattr(self, "arena_version", 0))

