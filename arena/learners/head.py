"""The chosen tokens' log-probabilities from the lm head, a slice of rows at a time.

The learner needs ``log pi(c_t | ...)`` of the completion's own tokens; the plain way
(:func:`arena.learners.batch.completion_log_softmax`) makes the logits and their log-softmax whole,
``(b, T, V)`` floats each (the built-in model: 192 KiB a scored token), keeps the log-softmax for the
backward pass and makes two more of that size there. :func:`head_logprobs` gives the same values and
gradients from the head's input ``h`` (``(N, H)``, 2.25 KiB a token for the built-in model), ``rows``
positions at a time:

    z_n = (W h_n + b) / tau                       (the logits at temperature tau)
    lse_n = log sum_v exp(z_nv)
    out_n = z_n[c_n] - lse_n                      = log softmax(z_n)[c_n]

and, in the backward pass, with ``p_n = softmax(z_n) = exp(z_n - lse_n)`` made again a slice at a time,

    d out_n / d z_n = onehot(c_n) - p_n
    dh_n = (g_n (onehot(c_n) - p_n) / tau) W      dW = sum_n (g_n (onehot(c_n) - p_n) / tau)^T h_n

so no ``(b, T, V)`` tensor is ever whole: what is kept is ``h``, the chosen ids and ``lse`` (``N``
floats). The logits are made twice (forward and backward), a head's worth of extra work on the scored
positions only. Liger-Kernel's fused linear cross-entropy and Apple's Cut Cross-Entropy (Wijmans et al.,
2024) compute the same thing; this is plain PyTorch (no Triton on CPU).

:func:`plain_head` says when the model's logits are its head's output and nothing else (the
architectures listed in :data:`PLAIN_LOGITS`, a plain ``nn.Linear`` head whose weights are all here);
otherwise the caller keeps the whole log-softmax. :func:`head_outputs_hidden` makes the model's forward
return the head's input in place of the logits, so every layout of
:mod:`arena.learners.batch` (right-padded, shared prefix, distinct prompts) yields ``h`` unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

PLAIN_LOGITS = frozenset({"llama", "mistral", "qwen2", "qwen3", "gpt2", "gpt_neox", "phi3", "olmo", "olmo2", "smollm3"})
"""Model types (``config.model_type``) whose logits are ``lm_head(hidden)`` with no scaling or capping after
it (Gemma 2 caps them, Cohere and Granite scale them: those keep the whole log-softmax)."""

SLICE_FLOATS = 1 << 23
"""Logits made at once: ``rows x V <= SLICE_FLOATS`` (32 MiB of float32), three such tensors at most."""


def plain_head(model: Any) -> torch.nn.Linear | None:
    """The model's output embeddings when its logits are exactly their output (see :data:`PLAIN_LOGITS`), else None."""
    inner = getattr(model, "module", model)  # a DeepSpeed engine's model
    base = getattr(inner, "get_base_model", None)  # a peft model, or one policy's view of a shared base
    inner = base() if callable(base) else inner
    config = getattr(inner, "config", None)
    if getattr(config, "model_type", None) not in PLAIN_LOGITS:
        return None
    get = getattr(inner, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if type(head) is not torch.nn.Linear or head.weight.numel() == 0:  # LoRA on the head, ZeRO-3 partitions
        return None
    return head


@contextmanager
def head_outputs_hidden(head: torch.nn.Module) -> Iterator[list[int]]:
    """Within: ``head(x)`` is ``x``. Yields a list that grows by one at each call (empty: the model never
    called its head, and what it returned is logits)."""
    calls: list[int] = []
    saved = head.__dict__.get("forward")  # a wrapper set on the instance (accelerate's hooks) comes back

    def forward(hidden: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
        calls.append(1)
        return hidden

    head.forward = forward  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        if saved is None:
            del head.forward
        else:
            head.forward = saved


def slice_rows(vocab: int) -> int:
    """Positions per slice: ``SLICE_FLOATS // vocab``, at least 1."""
    return max(1, SLICE_FLOATS // max(1, vocab))


def wide(dtype: torch.dtype) -> torch.dtype:
    """The dtype the log-probs are made in: float32, or the weights' own when wider (float64 in tests)."""
    return torch.promote_types(dtype, torch.float32)


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float) -> torch.Tensor:
    z = torch.nn.functional.linear(hidden, weight, bias).to(wide(weight.dtype))
    return z / temperature if temperature != 1.0 else z  # x / 1 is x; as completion_log_softmax divides


class HeadLogprobs(torch.autograd.Function):
    """``log softmax((W h + b) / tau)[c]`` per row of ``h``, a slice of rows at a time (module docstring)."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ids: torch.Tensor,
                temperature: float) -> torch.Tensor:
        n, step = hidden.shape[0], slice_rows(weight.shape[0])
        out = torch.empty(n, dtype=wide(weight.dtype), device=hidden.device)
        lse = torch.empty_like(out)
        for s in range(0, n, step):
            z = _logits(hidden[s : s + step], weight, bias, temperature)
            lse[s : s + step] = torch.logsumexp(z, -1)
            out[s : s + step] = z.gather(-1, ids[s : s + step, None]).squeeze(-1) - lse[s : s + step]
        ctx.save_for_backward(hidden, weight, bias, ids, lse)
        ctx.temperature = temperature
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, bias, ids, lse = ctx.saved_tensors
        tau = ctx.temperature
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        n, step, acc = hidden.shape[0], slice_rows(weight.shape[0]), wide(weight.dtype)
        dh = torch.empty_like(hidden) if need_h else None
        dw = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
        db = torch.zeros(weight.shape[0], dtype=acc, device=weight.device) if need_b else None
        for s in range(0, n, step):
            h, g = hidden[s : s + step], grad[s : s + step].to(acc)
            z = _logits(h, weight, bias, tau)
            dz = torch.exp(z.sub_(lse[s : s + step, None])).mul_(-g[:, None])  # -g p
            dz.scatter_add_(-1, ids[s : s + step, None], g[:, None])  # + g onehot(c)
            if tau != 1.0:
                dz.div_(tau)
            if dh is not None:
                dh[s : s + step] = dz.to(weight.dtype) @ weight
            if dw is not None:
                dw += dz.t() @ h.to(acc)
            if db is not None:
                db += dz.sum(0)
        return (dh, None if dw is None else dw.to(weight.dtype), None if db is None else db.to(bias.dtype), None, None)


def head_logprobs(hidden: torch.Tensor, head: torch.nn.Linear, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(head(hidden) / temperature)`` at ``ids``: ``hidden (..., H)``, ``ids (...)`` -> ``(...)`` in
    :func:`wide` of the head's dtype (float32 for float32 and bf16 weights)."""
    shape, tau = ids.shape, temperature if temperature > 0 else 1.0  # 0 (greedy) scores at 1, as the log-softmax does
    out = HeadLogprobs.apply(hidden.reshape(-1, hidden.shape[-1]), head.weight, head.bias, ids.reshape(-1), tau)
    return out.view(shape)
