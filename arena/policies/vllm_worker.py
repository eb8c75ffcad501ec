"""Runs inside vLLM's worker: receives the learner's weights after each update.

Named in ``LLM(worker_extension_cls="arena.policies.vllm_worker.WeightSync")``; the
policy calls ``llm.collective_rpc("arena_load_weights", args=(weights,))``, so
no function objects are pickled (no ``VLLM_ALLOW_INSECURE_SERIALIZATION``).
"""

from __future__ import annotations

from typing import Any

import torch


def _asleep(*_: Any, **__: Any) -> Any:
    raise RuntimeError("the vLLM engine's weights are released (WeightSync.arena_release); load weights first")


class WeightSync:
    """Mixed into vLLM's worker class; ``self.model_runner`` is the worker's."""

    model_runner: Any

    def arena_release(self) -> int:
        """Give the memory of the weights and the KV cache back to the system while the learner runs (vLLM's
        sleep mode is GPU-only): every parameter's and KV cache tensor's storage is resized to 0 bytes,
        and every linear layer's repacked weights (``cpu_linear``, a oneDNN or sgl handle holding its own
        copy) are dropped. The tensors keep their shapes, so the next :meth:`arena_load_weights` gives the
        storages their size back and loads into them; the KV cache's contents are not kept (the
        caller resets the prefix cache). Returns the bytes released (0 when already released)."""
        if getattr(self, "arena_released", None) is not None:
            return 0
        sizes: dict[int, tuple[Any, int]] = {}
        model = self.model_runner.get_model()
        for t in [*model.parameters(), *_kv_tensors(self.model_runner)]:
            st = t.untyped_storage()
            if st.nbytes() and st.data_ptr() not in sizes:
                sizes[st.data_ptr()] = (st, st.nbytes())
        for module in model.modules():
            if "cpu_linear" in vars(module):
                module.cpu_linear = _asleep
        for st, _ in sizes.values():
            st.resize_(0)
        self.arena_released = list(sizes.values())
        return sum(n for _, n in self.arena_released)

    def arena_restore(self) -> bool:
        """Undo :meth:`arena_release`'s resizing (the contents are undefined until weights are loaded);
        False when nothing was released."""
        released = getattr(self, "arena_released", None)
        if released is None:
            return False
        for st, n in released:
            st.resize_(n)
        self.arena_released = None
        return True

    def arena_load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> int:
        """Replace weights in place from (HF checkpoint name, tensor) pairs; returns how many. Released
        storages (:meth:`arena_release`) get their size back first.

        ``reload_weights`` runs the model's own loader again and then its
        post-load processing, which matters on CPU: vLLM repacks linear weights
        for oneDNN there and drops the originals, so writing into parameters
        directly would not reach the kernels.
        """
        self.arena_restore()
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


def _kv_tensors(runner: Any) -> list[torch.Tensor]:
    """The KV cache's tensors (views of vLLM's buffers; nested per layer on some backends)."""
    out: list[torch.Tensor] = []
    stack: list[Any] = list(getattr(runner, "kv_caches", None) or [])
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return out
