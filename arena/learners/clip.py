"""The global-norm clip applied inside the optimizer's step: :func:`clipped_step`."""

from __future__ import annotations

from typing import Any

import torch


def clipped_step(optimizer: Any, params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """One step of a fused AdamW on the gradients clipped to a global norm of ``max_norm``; returns
    their norm before the clip.

    ``clip_grad_norm_`` multiplies every gradient by ``c = min(1, max_norm / (norm + 1e-6))`` in a
    pass of its own; the fused AdamW kernel divides each gradient by ``optimizer.grad_scale`` as it
    reads it (the interface ``torch.amp.GradScaler`` uses), so ``grad_scale = 1 / c`` applies the
    same clip with no extra pass over the gradients (the same update to float rounding; none at all
    when ``c = 1``). A non-finite norm ends as under ``clip_grad_norm_``: an infinite one scales the
    finite gradients to 0 and the infinite ones to NaN, a NaN one leaves NaN in the weights."""
    norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    scale = (norm + 1e-6) / max_norm
    optimizer.grad_scale = scale.float() if float(scale) > 1.0 else None
    try:
        optimizer.step()
    finally:
        del optimizer.grad_scale
    return norm
