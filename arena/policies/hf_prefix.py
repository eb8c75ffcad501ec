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
rows' remaining columns run on it with their own positions. The generate loop does the same in its
prefill (``HFPolicy._decode``); the learner does it for its passes (arena/learners/prefix.py,
arena/learners/batch.py).

That prefix is also the same from one call to the next: Kuhn plays three generate calls a step (one a
turn), every prompt opening with the same rules, and the weights change only between steps. A
:class:`PrefixMemo` keeps the keys and values of the last common prefix :func:`prefill` ran, with the
weights they were computed with (:func:`weights_key`); the next call whose prefix begins with ``m >=
MIN_SHARED`` of those tokens, on the same weights, takes the ``m`` positions' keys and values and runs
only the rest of its prefix. The weights key changes with any in-place change of a parameter that torch
counts in the tensor's version (a weight push, a checkpoint load; arena's learner counts its fused optimizer's
writes itself) and with a parameter replaced, so a memo does not outlive the weights it was computed with.
``HFPolicy`` keeps one only with ``reuse_prefix`` (arena's training loop sets it).
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


class WeightsKey:
    """What identifies a model's weights now: its parameters themselves (held, so that a replaced one cannot
    hand its ``id`` to a newcomer), each one's version counter, and a peft model's active adapter (whose
    switch changes the function and no parameter). Two keys are equal when all three are.

    torch bumps a tensor's version at an in-place change made through autograd's view of it (``copy_``,
    ``load_state_dict``, the foreach optimizers). Writes it cannot see, through ``.data`` or a kernel that
    does not report them (the fused AdamW), must call ``torch.autograd.graph.increment_version``: arena's
    learner does after every optimizer step (arena/learners/update.py)."""

    def __init__(self, model: Any) -> None:
        active = getattr(model, "active_adapter", None)  # peft: a name (or names); a method elsewhere is not one
        self.adapter = str(active) if isinstance(active, (str, list, tuple)) else None
        self.params = list(model.parameters())
        self.versions = [p._version for p in self.params]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, WeightsKey) and self.adapter == other.adapter and self.versions == other.versions
                and len(self.params) == len(other.params) and all(a is b for a, b in zip(self.params, other.params)))

    __hash__ = None  # type: ignore[assignment]


def weights_key(model: Any) -> WeightsKey:
    """The model's :class:`WeightsKey` now."""
    return WeightsKey(model)


class PrefixMemo:
    """The keys and values of the last common prefix :func:`prefill` ran, and the weights they belong to.

    ``tokens``: the prefix's ids; ``layers``: per layer ``(keys, values)``, each ``(1, kv heads, len(tokens),
    head dim)``; ``key``: :func:`weights_key` when they were computed. ``reused``: prefix positions taken from
    the memo instead of run (a counter).
    """

    def __init__(self) -> None:
        self.key: WeightsKey | None = None
        self.tokens: tuple[int, ...] = ()
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.reused = 0

    def match(self, key: WeightsKey, tokens: Sequence[int]) -> int:
        """How many leading ``tokens`` the memo holds for these weights: 0 unless at least :data:`MIN_SHARED`."""
        if key != self.key or not self.layers:
            return 0
        m = len(os.path.commonprefix([list(self.tokens), list(tokens)]))
        return m if m >= MIN_SHARED else 0

    def load(self, cache: Any, m: int) -> None:
        """Fill the empty ``cache`` with the memo's first ``m`` positions."""
        for layer, (k, v) in enumerate(self.layers):
            cache.update(k[..., :m, :], v[..., :m, :], layer)
        self.reused += m

    def store(self, key: WeightsKey | None, tokens: Sequence[int], cache: Any) -> None:
        """Keep ``cache`` (batch 1, exactly ``tokens``) for the next call; caches of other kinds (sliding windows,
        quantised) are not kept."""
        from transformers.cache_utils import DynamicLayer

        layers = getattr(cache, "layers", None)
        if not layers or any(type(layer) is not DynamicLayer for layer in layers):
            self.key, self.layers = None, []
            return
        self.key, self.tokens = key, tuple(tokens)
        self.layers = [(layer.keys, layer.values) for layer in layers]


def prefill(model: Any, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any,
            shared: int, memo: PrefixMemo | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(last-position logits, the attention mask over the cache it leaves) of a LEFT-padded prefill into
    ``cache``; ``shared`` (:func:`shared_len`): the rows' first ``shared`` prompt tokens are the same.

    Row ``r``'s prompt starts at column ``s_r``; its first ``shared`` tokens run once (row 0's, batch 1)
    and their KV cache is repeated to every row. The other columns then run with every row's own
    positions: dropping the first ``shared`` columns leaves row ``r``'s rest of the prompt at columns
    ``[s_r, width - shared)``, and the columns left of ``s_r`` (padding, or the row's prefix again) are
    masked out. The returned mask is ``shared`` ones, then that tail mask: the cache's columns.

    ``memo``: the last call's prefix (:class:`PrefixMemo`); as many of its positions as match on the same
    weights are taken instead of run, and this call's prefix replaces it."""
    if shared == 0:
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True, logits_to_keep=1).logits[:, -1]
        return logits, mask
    rows, width = input_ids.shape
    start = width - mask.sum(-1)
    first = int(start[0])
    prefix = input_ids[:1, first:first + shared]
    have = 0
    if memo is not None:
        key, tokens = weights_key(model), prefix[0].tolist()
        have = memo.match(key, tokens)
        if have:
            memo.load(cache, have)
    if have < shared:  # positions follow the cache's length: have, have + 1, ...
        model(input_ids=prefix[:, have:], use_cache=True, past_key_values=cache, logits_to_keep=1)
    if memo is not None:
        memo.store(key, tokens, cache)
    cache.batch_repeat_interleave(rows)
    cols = torch.arange(width - shared, device=input_ids.device)
    tail = mask[:, shared:] * (cols[None, :] >= start[:, None])
    full = torch.cat([torch.ones_like(mask[:, :shared]), tail], dim=1)
    logits = model(input_ids=input_ids[:, shared:], attention_mask=full, position_ids=positions[:, shared:],
                   past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
    return logits, full
