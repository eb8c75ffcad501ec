"""Samples -> padded micro-batches, and the forward pass that scores completions.

``pack`` groups samples within a token budget; ``collate`` pads one group into
a :class:`MicroBatch` (left-padded prompts, right-padded completions, so
completion position ``t`` of every row is column ``P + t``); the forward returns
the log-softmax over the vocabulary at each completion position. Where nothing is shared, the
forward moves the rows to a right-padded layout and runs them without an attention mask, the lm
head only on the scored positions (:func:`right_padded_logits`), as a bare PyTorch step does.

Common prefixes (``share_prompts``, the learner's ``share_prompt_prefix``): rows whose prompts
begin with the same tokens travel together (:func:`arena.learners.prefix.pack_by_prefix`) and
the forward runs that prefix once, batch 1, then every row's suffix (the rest of its prompt and
its completion) on the prefix's KV cache, expanded to the rows. The expanded cache is a view, so
the backward sums the rows' gradients into the one prefix computation: the same values and
gradients as running each row whole (tests/learners/test_prefix.py holds them equal in float32).
Rows that repeat a prompt (a state's every legal action in exact descent, a GRPO group, a Kuhn
information state met in several games) go one step further: each distinct prompt runs once, and
its cache is selected for its rows before their completions run (:func:`distinct_prompt_logits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arena.core.types import Sample
from arena.learners.head import head_logprobs, head_outputs_hidden, plain_head
from arena.learners.prefix import pack_by_prefix, shared_prefix_len

MIN_SAVED = 32
"""Default ``share_prefix_min_tokens``: share a prefix only when it saves this many token positions."""


@dataclass
class MicroBatch:
    """Left-padded prompts followed by right-padded completions. Tensors are ``(b, L)`` / ``(b, T)``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    completion_mask: torch.Tensor  # (b, T) 1.0 on real completion tokens
    completion_ids: torch.Tensor  # (b, T)
    advantages: torch.Tensor  # (b,)
    gen_logprobs: torch.Tensor  # (b, T), NaN where the generator gave none
    weights: torch.Tensor  # (b,) Sample.weight: scales each row's whole loss
    token_weights: torch.Tensor  # (b, T) Sample.token_weights (advantage multipliers), 1.0 where absent
    index: list[int]  # positions of these samples in the batch
    shared_prompt: bool = False  # every row has the same prompt
    prefix_len: int = 0  # leading prompt tokens every row shares, run once when sharing (0: none)
    prompt_of: list[int] | None = None  # row -> its distinct prompt, when some rows repeat a prompt (else None)


def pack(
    samples: Sequence[Sample], token_budget: int, share_prompts: bool = False, min_saved: int = MIN_SAVED
) -> list[list[int]]:
    """Group sample indices into micro-batches within ``token_budget`` padded tokens.

    A micro-batch costs ``rows * (longest prompt + longest completion)``. With ``share_prompts``,
    samples whose prompts share a prefix worth running once (``prefix * (rows - 1) >= min_saved``)
    form their own micro-batches, costed with the prefix counted once
    (:func:`arena.learners.prefix.pack_by_prefix`); the rest are packed by length, longest first.
    """
    groups: list[list[int]] = []
    rest = list(range(len(samples)))
    if share_prompts:
        groups, rest = pack_by_prefix(
            [s.prompt_ids for s in samples], [len(s.completion_ids) for s in samples], token_budget, min_saved
        )
    order = sorted(rest, key=lambda i: -samples[i].length)
    mixed: list[list[int]] = []
    width = (0, 0)  # the last micro-batch's longest prompt and completion
    for i in order:
        p, t = len(samples[i].prompt_ids), len(samples[i].completion_ids)
        if mixed:
            grown = (max(width[0], p), max(width[1], t))
            if sum(grown) * (len(mixed[-1]) + 1) <= token_budget:
                mixed[-1].append(i)
                width = grown
                continue
        mixed.append([i])
        width = (p, t)
    return groups + mixed


def choice_budget(samples: Sequence[Sample], token_budget: int) -> int:
    """The token budget :func:`pack` gets when samples carry ``alternatives`` (a reply chosen among choices): the
    learner runs each micro-batch's alternatives beside it, with gradient (``Learner._normalise_choices``), so a
    sample with ``k`` of them costs ``1 + k`` rows. ``token_budget // (1 + max k)`` keeps a micro-batch and its
    alternatives within ``token_budget`` together; without alternatives it is ``token_budget``."""
    most = max((len(s.alternatives) for s in samples), default=0)
    return max(1, token_budget // (1 + most))


def collate(
    samples: Sequence[Sample], index: list[int], pad_id: int, device: torch.device, min_saved: int = MIN_SAVED
) -> MicroBatch:
    """The rows ``index`` of ``samples`` as one padded micro-batch; ``prefix_len`` is the prefix they
    can share (:func:`arena.learners.prefix.shared_prefix_len` with ``min_saved``)."""
    rows = [samples[i] for i in index]
    p_len = max(len(s.prompt_ids) for s in rows)
    t_len = max(len(s.completion_ids) for s in rows)
    b = len(rows)
    ids = torch.full((b, p_len + t_len), pad_id, dtype=torch.long)
    attn = torch.zeros((b, p_len + t_len), dtype=torch.long)
    comp = torch.full((b, t_len), pad_id, dtype=torch.long)
    cmask = torch.zeros((b, t_len))
    gen = torch.full((b, t_len), float("nan"))
    tok_w = torch.ones((b, t_len))
    for r, s in enumerate(rows):
        p, t = len(s.prompt_ids), len(s.completion_ids)
        ids[r, p_len - p : p_len] = torch.tensor(s.prompt_ids)
        ids[r, p_len : p_len + t] = torch.tensor(s.completion_ids)
        attn[r, p_len - p : p_len + t] = 1
        comp[r, :t] = torch.tensor(s.completion_ids)
        cmask[r, :t] = 1.0
        if s.logprobs:
            gen[r, :t] = torch.tensor(s.logprobs)
        if s.token_weights is not None:
            if len(s.token_weights) != t:
                raise ValueError(f"sample has {len(s.token_weights)} token_weights for {t} completion tokens")
            tok_w[r, :t] = torch.tensor(s.token_weights)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    adv = torch.tensor([s.advantage for s in rows], dtype=torch.float32)
    weights = torch.tensor([s.weight for s in rows], dtype=torch.float32)
    shared = len(rows) > 1 and all(s.prompt_ids == rows[0].prompt_ids for s in rows)
    prefix = shared_prefix_len([s.prompt_ids for s in rows], min_saved)
    first: dict[tuple[int, ...], int] = {}
    prompt_of = [first.setdefault(tuple(s.prompt_ids), len(first)) for s in rows]
    to = lambda x: x.to(device)  # noqa: E731
    return MicroBatch(
        to(ids), to(attn), to(pos), to(cmask), to(comp), to(adv), to(gen), to(weights), to(tok_w), list(index), shared,
        prefix, prompt_of if len(first) < len(rows) else None,
    )


def completion_log_softmax(model: Any, mb: MicroBatch, temperature: float, share_prompt: bool = False) -> torch.Tensor:
    """Log-softmax over the vocabulary at each completion position, at ``temperature``. ``-> (b, T, V)``.

    With ``share_prompt``, rows that repeat a prompt (``mb.prompt_of``) run it once
    (:func:`distinct_prompt_logits`), and a shared prefix (``mb.prefix_len``) is run once with the rows'
    suffixes on its cache (:func:`shared_prefix_logits`): same values and gradients, fewer FLOPs.
    """
    return log_softmax_at(completion_logits(model, mb, share_prompt), temperature)


def completion_logits(model: Any, mb: MicroBatch, share_prompt: bool = False) -> torch.Tensor:
    """The logits scoring each completion token, ``(b, T, V)`` in the model's dtype, by the layout
    :func:`completion_log_softmax` describes."""
    t_len = mb.completion_ids.shape[1]
    if share_prompt and mb.prompt_of is not None:
        logits = distinct_prompt_logits(model, mb)
    elif share_prompt and mb.prefix_len > 0:
        logits = shared_prefix_logits(model, mb)
    else:
        logits = right_padded_logits(model, mb)
    return logits[:, :t_len, :]


def log_softmax_at(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(logits / temperature)`` in float32 over the last dimension."""
    logits = logits.float()
    if temperature > 0 and temperature != 1.0:  # x / 1 is x: no pass over (b, T, V) and none in backward
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1)


def right_padded_logits(model: Any, mb: MicroBatch) -> torch.Tensor:
    """Logits at the last prompt position and every completion position but the last, ``(b, T, V)``
    (column ``t`` scores completion token ``t``), from one forward without an attention mask.

    Each row moves to the left of a right-padded layout as wide as its longest row (``p_r + t_r``,
    not ``P + T``); what follows a row's last token is never attended to by its own tokens under
    causal attention, so no mask is needed and the model runs its plain causal attention, its
    positions ``0 .. p_r + t_r - 1`` as in the left-padded layout. Row ``r``'s scored positions are
    then ``p_r - 1 + t``, different for every row: a forward pre-hook on the model's output
    embeddings (the lm head) gathers the hidden states there, so the head runs on ``T`` positions a
    row, as a bare step does. A model whose forward never calls its output embeddings, or a row with
    no prompt token, takes the left-padded forward with its mask instead: the same values.
    """
    t_len = mb.completion_ids.shape[1]
    lead = mb.attention_mask.argmax(-1)  # (b,) each row's padding columns on the left
    p_rows = mb.input_ids.shape[1] - t_len - lead  # (b,) each row's prompt length
    head_of = getattr(model, "get_output_embeddings", None)
    head = head_of() if callable(head_of) else None
    if head is None or int(p_rows.min()) < 1:
        return model(
            input_ids=mb.input_ids, attention_mask=mb.attention_mask, position_ids=mb.position_ids,
            logits_to_keep=t_len + 1, use_cache=False,
        ).logits[:, :-1]
    width = int(mb.attention_mask.sum(-1).max())
    cols = torch.arange(width, device=lead.device)[None, :] + lead[:, None]
    ids = mb.input_ids.gather(1, cols.clamp(max=mb.input_ids.shape[1] - 1))  # past a row's end: never attended
    at = (p_rows[:, None] - 1 + torch.arange(t_len, device=lead.device)[None, :]).clamp(max=width - 1)
    fired: list[bool] = []

    def gather(_: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        fired.append(True)
        hidden = args[0]
        return (hidden.gather(1, at[..., None].expand(-1, -1, hidden.shape[-1])), *args[1:])

    hook = head.register_forward_pre_hook(gather)
    try:
        logits = model(input_ids=ids, use_cache=False, logits_to_keep=0).logits
    finally:
        hook.remove()
    if not fired:  # the head ran outside its module: every position's logits came back
        logits = logits.gather(1, at[..., None].expand(-1, -1, logits.shape[-1]))
    return logits


def shared_prefix_logits(model: Any, mb: MicroBatch) -> torch.Tensor:
    """Logits at the last prompt position and every completion position, ``(b, T + 1, V)``, with the
    ``mb.prefix_len`` shared tokens run once.

    Row ``r``'s prompt starts at column ``s_r = P - p_r`` of the left-padded layout, so its prefix
    is columns ``[s_r, s_r + c)`` and its suffix ``[s_r + c, P + T)``. Dropping the first ``c``
    columns of every row leaves each suffix at ``[s_r, P - c + T)`` with its positions
    (``c + j - s_r``) unchanged; columns left of ``s_r`` hold the row's own prefix again and are
    masked out, as padding is. Every row keeps at least one prompt token after the prefix, so column
    ``P - c - 1`` is each row's last prompt token, as column ``P - 1`` is without sharing.
    """
    t_len = mb.completion_ids.shape[1]
    out, _ = after_prefix(model, mb.input_ids, mb.attention_mask, mb.position_ids, mb.prefix_len, t_len + 1)
    return out.logits


def after_prefix(model: Any, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, c: int,
                 keep: int) -> tuple[Any, torch.Tensor]:
    """``(the model's output, the mask over its cache)`` for left-padded ``ids`` whose first ``c`` prompt
    tokens are the same in every row: those run once (batch 1), their cache expanded to the rows, then the
    columns after them, with each row's own positions and its own prefix columns masked out
    (:func:`shared_prefix_logits` explains the layout); ``c`` 0: one plain forward. ``keep``: the output's
    last positions with logits."""
    cache = None
    if c > 0:
        start = (mask.cumsum(-1) == 0).sum(-1)  # (rows,) each row's first real column
        head = model(input_ids=ids[:1, int(start[0]) : int(start[0]) + c], use_cache=True, logits_to_keep=1)
        cache = expand_cache(head.past_key_values, ids.shape[0])
        cols = torch.arange(ids.shape[1] - c, device=ids.device)
        mask = torch.cat([torch.ones_like(mask[:, :c]), mask[:, c:] * (cols[None, :] >= start[:, None])], dim=1)
    out = model(input_ids=ids[:, c:], attention_mask=mask, position_ids=positions[:, c:], past_key_values=cache,
                use_cache=True, logits_to_keep=keep)
    return out, mask


def distinct_prompt_logits(model: Any, mb: MicroBatch) -> torch.Tensor:
    """Logits at the last prompt position and every completion position, ``(b, T + 1, V)``, with each
    distinct prompt run once (``mb.prompt_of``: several samples of one prompt, every legal action of a
    state in exact descent, a chosen reply beside the other choices).

    The ``k`` distinct prompts run as ``k`` rows of the left-padded layout (their common prefix
    ``mb.prefix_len`` once, as :func:`shared_prefix_logits` runs it, when there is one), keeping the
    cache and the logits at the last prompt column. The cache's rows are then selected for the ``b``
    rows (``index_select``: autograd sums each prompt's rows' gradients back into it), and the
    completion columns run on it with their own positions and each row's prompt mask.
    """
    t_len = mb.completion_ids.shape[1]
    p_len = mb.input_ids.shape[1] - t_len
    inv = torch.tensor(mb.prompt_of, device=mb.input_ids.device)
    k = int(inv.max()) + 1
    first = torch.tensor([mb.prompt_of.index(j) for j in range(k)], device=inv.device)
    ids, mask, pos = (x.index_select(0, first)[:, :p_len] for x in (mb.input_ids, mb.attention_mask, mb.position_ids))
    prompts, mask = after_prefix(model, ids, mask, pos, mb.prefix_len if k > 1 else 0, 1)
    cache = select_cache(prompts.past_key_values, inv)
    tail = model(
        input_ids=mb.input_ids[:, p_len:], attention_mask=torch.cat([mask.index_select(0, inv), mb.attention_mask[:, p_len:]], 1),
        position_ids=mb.position_ids[:, p_len:], past_key_values=cache, use_cache=True, logits_to_keep=t_len,
    )
    return torch.cat([prompts.logits.index_select(0, inv), tail.logits], dim=1)


def select_cache(cache: Any, rows: torch.Tensor) -> Any:
    """``cache``'s batch rows ``rows`` (with repeats), in place: plain key/value tensors (transformers'
    ``DynamicCache``) are ``index_select``-ed, so autograd sums the gradients of repeated rows; other
    caches use their own ``batch_select_indices``."""
    layers = getattr(cache, "layers", None)
    if layers and all(isinstance(getattr(layer, "keys", None), torch.Tensor) for layer in layers):
        for layer in layers:
            layer.keys = layer.keys.index_select(0, rows)
            layer.values = layer.values.index_select(0, rows)
    else:
        cache.batch_select_indices(rows)
    return cache


def expand_cache(cache: Any, rows: int) -> Any:
    """``cache`` (batch 1) repeated to ``rows`` rows in place, as views where the cache holds plain
    key/value tensors (transformers' ``DynamicCache``), else by its own ``batch_repeat_interleave``.
    Either way autograd sums the rows' gradients back into the one prefix."""
    layers = getattr(cache, "layers", None)
    if layers and all(isinstance(getattr(layer, "keys", None), torch.Tensor) for layer in layers):
        for layer in layers:
            layer.keys = layer.keys.expand(rows, *layer.keys.shape[1:])
            layer.values = layer.values.expand(rows, *layer.values.shape[1:])
    else:
        cache.batch_repeat_interleave(rows)
    return cache


def completion_logprobs(model: Any, mb: MicroBatch, temperature: float, share_prompt: bool = False) -> torch.Tensor:
    """Log-probs of the completion tokens under ``model`` at ``temperature``. ``-> (b, T)``.

    Where the model's logits are its plain head's output (:func:`arena.learners.head.plain_head`), the
    forward stops at the head's input and :func:`arena.learners.head.head_logprobs` scores the chosen
    tokens a slice of positions at a time: the same values and gradients without a ``(b, T, V)`` tensor.
    Otherwise the whole log-softmax (:func:`completion_log_softmax`), gathered."""
    head = plain_head(model)
    if head is not None:
        with head_outputs_hidden(head) as calls:
            hidden = completion_logits(model, mb, share_prompt)
        if calls:  # the model called its head: ``hidden`` is its input
            return head_logprobs(hidden, head, mb.completion_ids, temperature)
        logp = log_softmax_at(hidden, temperature)  # it made its logits some other way: they came back
    else:
        logp = completion_log_softmax(model, mb, temperature, share_prompt)
    return logp.gather(-1, mb.completion_ids[..., None]).squeeze(-1)
