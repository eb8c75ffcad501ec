"""The learner's weights seen at another precision: :func:`rounded_weights`, for the weight-sync canary.

Every write here goes through ``.data``, which torch's version counters do not see, so each is counted
(``torch.autograd.graph.increment_version``): a generator that keys what it keeps on those counters
(HFPolicy's prefix memo, arena/policies/hf_prefix.py) sees the change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


@contextlib.contextmanager
def rounded_weights(module: Any, dtype: str | None) -> Iterator[None]:
    """Within the block every floating-point weight of ``module`` holds its value rounded to ``dtype``
    (round to nearest even, as ``Tensor.to`` and a sync's ``copy_`` round); after it, the exact original.

    The originals wait in CPU memory (one copy of the weights that are wider than ``dtype``); a
    DeepSpeed ZeRO-3 parameter's own partition (``ds_tensor``) is what is rounded. ``None``, or weights
    no wider than ``dtype``, change nothing."""
    target = getattr(torch, dtype) if dtype else None
    tensors = []
    if target is not None:
        for p in module.parameters():
            data = getattr(p, "ds_tensor", None)
            data = p.data if data is None else data
            if data.is_floating_point() and data.numel() and torch.finfo(data.dtype).bits > torch.finfo(target).bits:
                tensors.append(data)
    saved = [t.to("cpu", copy=True) for t in tensors]
    # Written through .data, which torch does not count: count it (HFPolicy's PrefixMemo keys on the counts).
    params = [p for p in module.parameters() if p.numel()] if tensors else []
    try:
        for t in tensors:
            t.copy_(t.to(target))
        torch.autograd.graph.increment_version(params)
        yield
    finally:
        for t, original in zip(tensors, saved, strict=True):
            t.copy_(original)
        torch.autograd.graph.increment_version(params)
