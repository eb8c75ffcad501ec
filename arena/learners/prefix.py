"""Common prompt prefixes: which rows share one, how long, and how to pack them (pure integer maths).

A Kuhn sample's ~150-token prompt opens with ~120 tokens of rules that every sample repeats; SpyRL's
players share the system prompt up to the player number. The learner runs such a prefix once per
micro-batch and the rows' suffixes (the rest of the prompt, then the completion) on its KV cache
(:func:`arena.learners.batch.completion_log_softmax`); this module decides what to share:

* :func:`shared_prefix_len` -- the prefix a group of prompts can share: their longest common prefix,
  cut so that every row keeps at least one prompt token of its own (that last prompt token's logits
  score the first completion token, so every row's suffix yields them), and 0 when the positions it
  saves, ``c * (rows - 1)``, are fewer than ``min_saved`` (a second forward call is not free);
* :func:`forward_cost` -- the token positions a micro-batch's forward runs, padding included:
  ``c + rows * (P - c + T)`` with ``P`` the longest prompt and ``T`` the longest completion
  (prompts are left-padded and completions right-padded, each to its own longest); when the rows
  hold only ``k < rows`` distinct prompts, each runs once (``arena.learners.batch.distinct_prompt_logits``):
  ``c + k * (P - c) + rows * T`` (``P`` once when ``k`` is 1, whatever ``c``); with nothing shared
  (``c`` 0, every prompt distinct), the rows run right-padded to the longest row instead
  (``arena.learners.batch.right_padded_logits``): ``rows * max(p_r + t_r)``;
* :func:`pack_by_prefix` -- micro-batches of rows with a common prefix: the rows sorted by prompt
  (so rows sharing a prefix are adjacent; the common prefix of a sorted run is that of its first and
  last), grown greedily while the forward's cost (a repeated prompt counted once) stays within the
  token budget and each added row costs no more than running it alone; the runs whose prefix is worth sharing are returned as
  micro-batches, the other rows are left to the plain length-sorted packing.

Shapes: prompts are sequences of token ids; lengths are plain ints.
"""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` have in common."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def shared_prefix_len(prompts: Sequence[Sequence[int]], min_saved: int = 1) -> int:
    """Tokens the ``prompts`` can share: their common prefix, at most the shortest prompt less one;
    0 with fewer than two prompts or when ``prefix * (rows - 1) < min_saved``."""
    if len(prompts) < 2:
        return 0
    first, last = min(prompts, key=tuple), max(prompts, key=tuple)  # a sorted set's common prefix
    c = min(common_prefix(first, last), min(len(p) for p in prompts) - 1)
    return c if c > 0 and c * (len(prompts) - 1) >= min_saved else 0


def forward_cost(
    prompt_lens: Sequence[int], completion_lens: Sequence[int], shared: int = 0, distinct: int | None = None
) -> int:
    """Token positions one micro-batch's forward runs, padding included, with ``shared`` prefix tokens
    run once: ``shared + rows * (max prompt - shared + max completion)`` (the left-padded layout); with
    ``distinct`` (``k``) prompts among more rows, each prompt runs once: ``shared + k * (max prompt -
    shared) + rows * max completion`` (with one prompt, that prompt once, whatever ``shared``). With
    nothing shared, the rows run right-padded to the longest row
    (:func:`arena.learners.batch.right_padded_logits`): ``rows * max(prompt_r + completion_r)``."""
    if not prompt_lens:
        return 0
    rows, p, t = len(prompt_lens), max(prompt_lens), max(completion_lens)
    if distinct is not None and distinct < rows:
        return shared + distinct * (p - shared) + rows * t
    if shared == 0:
        return rows * max(a + b for a, b in zip(prompt_lens, completion_lens, strict=True))
    return shared + rows * (p - shared + t)


def padded_share(prompt_lens: Sequence[int], completion_lens: Sequence[int], shared: int = 0) -> float:
    """Share of a micro-batch's forward positions that are padding (0.0 = none)."""
    cost = forward_cost(prompt_lens, completion_lens, shared)
    real = shared + sum(p + t - shared for p, t in zip(prompt_lens, completion_lens, strict=True))
    return (cost - real) / cost if cost else 0.0


def pack_by_prefix(
    prompts: Sequence[Sequence[int]], completion_lens: Sequence[int], token_budget: int, min_saved: int = 1
) -> tuple[list[list[int]], list[int]]:
    """``(micro-batches that share a prefix, the other row indices)``; see the module.

    Every index appears once in the two together. A micro-batch's cost (:func:`forward_cost` with its
    shared prefix) stays within ``token_budget``; its rows are in prompt order (shorter completions of
    one prompt after longer)."""
    order = sorted(range(len(prompts)), key=lambda i: (tuple(prompts[i]), -completion_lens[i]))

    def cost(rows: list[int]) -> int:
        p = [prompts[i] for i in rows]
        k = len({tuple(x) for x in p})
        return forward_cost([len(x) for x in p], [completion_lens[i] for i in rows], shared_prefix_len(p), k)

    runs: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current:
            grown = cost(current + [i])
            if grown <= token_budget and grown - cost(current) <= len(prompts[i]) + completion_lens[i]:
                current.append(i)
                continue
            runs.append(current)
        current = [i]
    if current:
        runs.append(current)
    shared: list[list[int]] = []
    rest: list[int] = []
    for run in runs:
        if shared_prefix_len([prompts[i] for i in run], min_saved) > 0:
            shared.append(run)
        else:
            rest.extend(run)
    return shared, rest
