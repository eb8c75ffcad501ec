"""Prefix sharing for the transformers backend: a prompt repeated in one batch is prefilled once.

Several requests of one generate batch often carry the very same prompt ids: LSP's G
solvers read the same query, a household episode's G attempts start from the same
world, a GRPO group samples G completions of one prompt. Prefilling each copy costs
the prompt's whole forward pass again for an identical KV cache. Instead
:func:`dedupe` keeps the batch's distinct prompts (first-seen order) and, per row,
the index of its prompt; the prefill runs on the distinct prompts only and
:func:`expand` then gathers the KV cache, the last-position logits and the masks back
to one row per request (``rows[i] = distinct[index[i]]``), before any token is
sampled. From there decoding is the unshared loop: each row samples with its own
generator, so per-row RNG and seeds are untouched.

Exactness: the distinct prompts are left-padded to the same width as the full batch
(the longest prompt is among them), so each row's prefill sees the same tokens,
positions and mask as without sharing; only the batch size of the prefill's matrix
products differs, which changes logits in the last float bits at most (the tests
hold tokens equal and logprobs within 1e-5 in float32).

The KV cache is expanded by copying (``DynamicCache.batch_select_indices`` with
repeated indices): decoding memory is that of the unshared batch, the saving is the
prefill's compute and activations. Sharing a common prefix between DIFFERENT prompts
(SpyRL's players share the system prompt up to the player number) is not done here; the
learner does it for its passes (arena/learners/prefix.py, arena/learners/batch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def dedupe(prompts: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
    """``(distinct prompts in first-seen order, index of each row's prompt among them)``.

    ``[distinct[i] for i in index] == prompts`` always holds.
    """
    seen: dict[tuple[int, ...], int] = {}
    distinct: list[list[int]] = []
    index: list[int] = []
    for ids in prompts:
        key = tuple(ids)
        if key not in seen:
            seen[key] = len(distinct)
            distinct.append(list(ids))
        index.append(seen[key])
    return distinct, index


def expand(cache: Any, index: Sequence[int], *tensors: torch.Tensor) -> list[torch.Tensor]:
    """Gather the cache's batch rows (in place) and each tensor's rows to ``index``.

    ``cache``: a transformers ``DynamicCache`` holding the distinct prompts' prefill;
    ``tensors``: per-row tensors of that prefill (last logits, attention mask,
    positions). Returns the tensors with ``len(index)`` rows.
    """
    rows = torch.tensor(list(index), dtype=torch.long, device=tensors[0].device if tensors else "cpu")
    cache.batch_select_indices(rows)
    return [t.index_select(0, rows) for t in tensors]
