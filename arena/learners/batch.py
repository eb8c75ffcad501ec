"""Samples -> padded micro-batches, and the forward pass that scores completions.

``pack`` groups samples within a token budget; ``collate`` pads one group into
a :class:`MicroBatch` (left-padded prompts, right-padded completions, so
completion position ``t`` of every row is column ``P + t``); the forward returns
the log-softmax over the vocabulary at each completion position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arena.core.types import Sample


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
    shared_prompt: bool = False  # every row has the same prompt: run it once


def pack(samples: Sequence[Sample], token_budget: int, share_prompts: bool = False) -> list[list[int]]:
    """Group sample indices into micro-batches within ``token_budget`` padded tokens.

    With ``share_prompts``, samples with the same prompt (a GRPO group, SpyRL's
    civilians) form their own micro-batches, costed as one prompt plus the rows'
    completions, since the prompt is run once for all of them.
    """
    groups: list[list[int]] = []
    rest = list(range(len(samples)))
    if share_prompts:
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i in rest:
            by_prompt.setdefault(tuple(samples[i].prompt_ids), []).append(i)
        rest = []
        for members in by_prompt.values():
            if len(members) < 2:
                rest.extend(members)
                continue
            p_len = len(samples[members[0]].prompt_ids)
            current: list[int] = []
            for i in sorted(members, key=lambda k: -len(samples[k].completion_ids)):
                longest = max([len(samples[j].completion_ids) for j in current] + [len(samples[i].completion_ids)])
                if current and p_len + longest * (len(current) + 1) > token_budget:
                    groups.append(current)
                    current = []
                current.append(i)
            groups.append(current)
    order = sorted(rest, key=lambda i: -samples[i].length)
    mixed: list[list[int]] = []
    for i in order:
        if mixed:
            g = mixed[-1]
            longest = max(samples[g[0]].length, samples[i].length)
            if longest * (len(g) + 1) <= token_budget:
                g.append(i)
                continue
        mixed.append([i])
    return groups + mixed


def collate(samples: Sequence[Sample], index: list[int], pad_id: int, device: torch.device) -> MicroBatch:
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
    to = lambda x: x.to(device)  # noqa: E731
    return MicroBatch(
        to(ids), to(attn), to(pos), to(cmask), to(comp), to(adv), to(gen), to(weights), to(tok_w), list(index), shared
    )


def completion_log_softmax(model: Any, mb: MicroBatch, temperature: float, share_prompt: bool = False) -> torch.Tensor:
    """Log-softmax over the vocabulary at each completion position, at ``temperature``. ``-> (b, T, V)``.

    When every row has the same prompt and ``share_prompt`` is set, the prompt is run
    once and its KV cache repeated for the rows (same values and gradients, fewer
    FLOPs: a GRPO group's prompt is usually longer than its completions).
    """
    b, t_len = mb.completion_ids.shape
    if share_prompt and mb.shared_prompt:
        p_len = mb.input_ids.shape[1] - t_len
        head = model(input_ids=mb.input_ids[:1, :p_len], use_cache=True, logits_to_keep=1)
        cache = head.past_key_values
        cache.batch_repeat_interleave(b)
        tail = model(
            input_ids=mb.completion_ids, attention_mask=mb.attention_mask, position_ids=mb.position_ids[:, p_len:],
            past_key_values=cache, use_cache=True, logits_to_keep=t_len,
        )
        logits = torch.cat([head.logits.expand(b, -1, -1), tail.logits[:, :-1, :]], dim=1).float()
    else:
        out = model(
            input_ids=mb.input_ids, attention_mask=mb.attention_mask, position_ids=mb.position_ids,
            logits_to_keep=t_len + 1, use_cache=False,
        )
        logits = out.logits[:, :-1, :].float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1)


def completion_logprobs(model: Any, mb: MicroBatch, temperature: float, share_prompt: bool = False) -> torch.Tensor:
    """Log-probs of the completion tokens under ``model`` at ``temperature``. ``-> (b, T)``."""
    logp = completion_log_softmax(model, mb, temperature, share_prompt)
    return logp.gather(-1, mb.completion_ids[..., None]).squeeze(-1)
