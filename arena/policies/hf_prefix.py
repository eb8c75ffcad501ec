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
prefill's compute and activations.

A common prefix of DIFFERENT prompts (Kuhn's and Leduc's rules before each information state)
is run once by :func:`prefill` for the scorer (``HFPolicy.score_rows``: the exact evaluations,
the best-response bot, exploitability descent, score-mode choices): the distinct prompts'
longest common prefix ``c`` (at most the shortest prompt less one, so every row still computes
its own last prompt position) runs as one row, its KV cache is repeated to every row, and the
rows' remaining columns run on it with their own positions. The generate loop does not do this
(its prompts are prefilled by ``model.generate``-style decoding, one identical prompt at a time);
the learner does it for its passes (arena/learners/prefix.py, arena/learners/batch.py).
"""

from __future__ import annotations

import os
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


#: A common prefix shorter than this is not run apart: a second forward call is not free.
MIN_SHARED = 16


def shared_len(prompts: Sequence[Sequence[int]], minimum: int = MIN_SHARED) -> int:
    """The distinct ``prompts``' longest common prefix, at most the shortest prompt less one token; 0 for
    one prompt or a prefix shorter than ``minimum``."""
    if len(prompts) < 2:
        return 0
    c = min(len(os.path.commonprefix([list(p) for p in prompts])), min(len(p) for p in prompts) - 1)
    return c if c >= minimum else 0


def prefill(model: Any, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any,
            shared: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(last-position logits, the attention mask over the cache it leaves) of a LEFT-padded prefill into
    ``cache``; ``shared`` (:func:`shared_len`): the rows' first ``shared`` prompt tokens are the same.

    Row ``r``'s prompt starts at column ``s_r``; its first ``shared`` tokens run once (row 0's, batch 1)
    and their KV cache is repeated to every row. The other columns then run with every row's own
    positions: dropping the first ``shared`` columns leaves row ``r``'s rest of the prompt at columns
    ``[s_r, width - shared)``, and the columns left of ``s_r`` (padding, or the row's prefix again) are
    masked out. The returned mask is ``shared`` ones, then that tail mask: the cache's columns."""
    if shared == 0:
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True, logits_to_keep=1).logits[:, -1]
        return logits, mask
    rows, width = input_ids.shape
    start = width - mask.sum(-1)
    first = int(start[0])
    model(input_ids=input_ids[:1, first:first + shared], use_cache=True, past_key_values=cache, logits_to_keep=1)
    cache.batch_repeat_interleave(rows)
    cols = torch.arange(width - shared, device=input_ids.device)
    tail = mask[:, shared:] * (cols[None, :] >= start[:, None])
    full = torch.cat([torch.ones_like(mask[:, :shared]), tail], dim=1)
    logits = model(input_ids=input_ids[:, shared:], attention_mask=full, position_ids=positions[:, shared:],
                   past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
    return logits, full
