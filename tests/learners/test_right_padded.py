"""The unshared forward (arena/learners/batch.py, ``right_padded_logits``): rows moved to a right-padded
layout without an attention mask, the lm head run only on each row's scored positions. It gives the values
and the gradients of the left-padded, masked forward, and falls back to that forward where it cannot apply."""

from __future__ import annotations

import copy
from typing import Any

import torch
from test_prefix import kuhn_like
from tiny_model import PAD, flat_grad, seq_log_softmax

from arena.core.types import Sample
from arena.learners.batch import MicroBatch, collate, completion_log_softmax, right_padded_logits
from tolerance import close32, close64


def masked(model: Any, mb: MicroBatch) -> torch.Tensor:
    """The left-padded forward with its mask: the reference layout."""
    t_len = mb.completion_ids.shape[1]
    out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, position_ids=mb.position_ids,
                logits_to_keep=t_len + 1, use_cache=False)
    return out.logits[:, :-1]


class ElsewhereHead(torch.nn.Module):
    """A model whose ``get_output_embeddings`` is a module its forward never calls."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.inner = model
        self.unused = torch.nn.Linear(4, 4)

    def get_output_embeddings(self) -> Any:
        return self.unused

    def forward(self, **kw: Any) -> Any:
        return self.inner(**kw)


class NoHead(ElsewhereHead):
    def get_output_embeddings(self) -> Any:
        return None


def test_each_row_equals_the_row_alone_and_the_head_sees_only_scored_positions(tiny: Any) -> None:
    samples = kuhn_like()
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"))
    seen: list[tuple[int, ...]] = []
    hook = tiny.lm_head.register_forward_hook(lambda _m, args, _out: seen.append(tuple(args[0].shape)))
    with torch.no_grad():
        got = completion_log_softmax(tiny, mb, 0.7)
    hook.remove()
    t_len = mb.completion_ids.shape[1]
    assert seen == [(len(samples), t_len, tiny.config.hidden_size)]
    for r, s in enumerate(samples):
        close32(got[r, : len(s.completion_ids)], seq_log_softmax(tiny, s.prompt_ids, s.completion_ids, 0.7))


def test_values_and_gradients_equal_the_masked_forward(tiny: Any) -> None:
    samples = kuhn_like(n=7, seed=11)
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"))
    m = mb.completion_mask.bool()
    grads, values = [], []
    for fn in (masked, right_padded_logits):
        model = copy.deepcopy(tiny)
        logits = fn(model, mb)
        logp = torch.log_softmax(logits.float(), -1).gather(-1, mb.completion_ids[..., None]).squeeze(-1)
        (logp * mb.completion_mask * mb.advantages[:, None]).sum().backward()
        grads.append(flat_grad(model))
        values.append(logp[m])
    close32(values[1], values[0])
    close32(grads[1], grads[0])


def test_in_float64_the_layouts_agree_to_rounding(tiny: Any) -> None:
    """float32's tolerances above leave room for a small error; float64 leaves none: the same values and
    gradients to 1e-10 (measured 2e-15), so what float32 shows is rounding, not a wrong position or row."""
    samples = kuhn_like(n=7, seed=11)
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"))
    grads, values = [], []
    for fn in (masked, right_padded_logits):
        model = copy.deepcopy(tiny).double()
        logp = torch.log_softmax(fn(model, mb), -1).gather(-1, mb.completion_ids[..., None]).squeeze(-1)
        (logp * mb.completion_mask * mb.advantages[:, None].double()).sum().backward()
        grads.append(flat_grad(model))
        values.append(logp[mb.completion_mask.bool()])
    close64(values[1], values[0])
    close64(grads[1], grads[0])


def test_a_head_outside_its_module_or_none_falls_back_to_the_same_values(tiny: Any) -> None:
    samples = kuhn_like(n=5, seed=5)
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"))
    m = mb.completion_mask.bool()
    with torch.no_grad():
        want = torch.log_softmax(masked(tiny, mb), -1)[m]
        for wrapped in (ElsewhereHead(tiny), NoHead(tiny)):
            got = completion_log_softmax(wrapped, mb, 1.0)[m]
            close32(got, want)


def test_rows_of_one_length_and_of_one_completion_token(tiny: Any) -> None:
    samples = [Sample(prompt_ids=[5, 6, 7], completion_ids=[8], advantage=1.0),
               Sample(prompt_ids=[9], completion_ids=[10, 11, 12, 13], advantage=-1.0)]
    mb = collate(samples, [0, 1], PAD, torch.device("cpu"))
    with torch.no_grad():
        got = completion_log_softmax(tiny, mb, 1.0)
        for r, s in enumerate(samples):
            close32(got[r, : len(s.completion_ids)], seq_log_softmax(tiny, s.prompt_ids, s.completion_ids))
