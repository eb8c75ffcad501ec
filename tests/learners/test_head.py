"""The chosen tokens' log-probs from the lm head a slice at a time (arena/learners/head.py): the
log-softmax's values and gradients, in every layout of the learner's forward, and no ``(b, T, V)``
tensor kept for the backward pass."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from test_prefix import kuhn_like, repeated_prompts
from tiny_model import PAD, VOCAB

import arena.learners.head as head_mod
from arena.learners.batch import collate, completion_log_softmax, completion_logprobs
from arena.learners.head import head_logprobs, head_outputs_hidden, plain_head
from tolerance import close32, close64


def reference(hidden: torch.Tensor, head: torch.nn.Linear, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    z = head(hidden)
    z = z.to(torch.promote_types(z.dtype, torch.float32))
    z = z / temperature if temperature > 0 else z
    return torch.log_softmax(z, -1).gather(-1, ids[..., None]).squeeze(-1)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 2.0, 0.0])  # 0: greedy is scored at 1, as the log-softmax does
@pytest.mark.parametrize("slice_rows", [1, 3, 100])  # 3 of 7 rows: an uneven last slice
def test_values_and_gradients_are_the_log_softmax_in_float64(monkeypatch: pytest.MonkeyPatch, temperature: float,
                                                                slice_rows: int) -> None:
    monkeypatch.setattr(head_mod, "SLICE_FLOATS", slice_rows * 11)
    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(5, 11).double()
    with torch.no_grad():
        head.weight.copy_(3 * torch.randn(11, 5, generator=gen, dtype=torch.float64))
    hidden = torch.randn(7, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, 11, (7,), generator=gen)
    upstream = torch.randn(7, generator=gen, dtype=torch.float64)
    got = head_logprobs(hidden, head, ids, temperature)
    grads = torch.autograd.grad((got * upstream).sum(), [hidden, head.weight, head.bias])
    want = reference(hidden, head, ids, temperature).double()
    wants = torch.autograd.grad((want * upstream).sum(), [hidden, head.weight, head.bias])
    close64(got.double(), want)
    for g, w in zip(grads, wants, strict=True):
        close64(g.double(), w)


def test_a_hand_value() -> None:
    """Logits (0, ln 3) at the chosen index 1: log(3/4); at temperature 1/2, (0, 2 ln 3): log(9/10)."""
    head = torch.nn.Linear(1, 2, bias=False).double()
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[0.0], [math.log(3.0)]], dtype=torch.float64))
    h, ids = torch.ones(1, 1, dtype=torch.float64), torch.tensor([1])
    close64(head_logprobs(h, head, ids, 1.0), torch.tensor([math.log(0.75)], dtype=torch.float64))
    close64(head_logprobs(h, head, ids, 0.5), torch.tensor([math.log(0.9)], dtype=torch.float64))


def batches() -> dict[str, tuple[list[Any], int, bool]]:
    """Each layout of the learner's forward: (samples, share_prefix_min_tokens, share_prompt)."""
    return {"right-padded": (kuhn_like(), 1, False), "shared prefix": (kuhn_like(), 1, True),
            "distinct prompts": (repeated_prompts(), 10_000, True),
            "distinct prompts after a prefix": (repeated_prompts(), 1, True)}


@pytest.mark.parametrize("layout", list(batches()))
def test_every_layout_gives_the_whole_log_softmax_values_and_gradients(tiny: Any, layout: str) -> None:
    samples, min_saved, share = batches()[layout]
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=min_saved)
    mask = mb.completion_mask
    upstream = torch.randn(mask.shape, generator=torch.Generator().manual_seed(1)) * mask
    sliced, whole = copy.deepcopy(tiny), copy.deepcopy(tiny)
    assert plain_head(sliced) is sliced.lm_head
    got = completion_logprobs(sliced, mb, 0.7, share)
    want = completion_log_softmax(whole, mb, 0.7, share).gather(-1, mb.completion_ids[..., None]).squeeze(-1)
    close32(got[mask.bool()], want[mask.bool()])
    (got * upstream).sum().backward()
    (want * upstream).sum().backward()
    for (name, p), q in zip(sliced.named_parameters(), whole.parameters(), strict=True):
        assert q.grad is not None and q.grad.abs().sum() > 0, name
        close32(p.grad, q.grad, msg=name)
    assert "forward" not in sliced.lm_head.__dict__  # the head is itself again


def test_no_vocabulary_wide_tensor_is_kept_for_the_backward_pass(tiny: Any) -> None:
    """What autograd saves: with the head a slice at a time, nothing ``V`` wide; the whole log-softmax keeps
    ``(b, T, V)`` (the planted regression). (The tiny model's MLP is V wide too, over all ``L > T`` positions.)"""
    samples = kuhn_like()
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=1)
    b, t = mb.completion_ids.shape

    def saved(fn: Any) -> list[tuple[int, ...]]:
        shapes: list[tuple[int, ...]] = []

        def pack(x: torch.Tensor) -> torch.Tensor:
            shapes.append(tuple(x.shape))
            return x

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            fn(copy.deepcopy(tiny))
        return [s for s in shapes if s and s[-1] == VOCAB and int(torch.tensor(s).prod()) == b * t * VOCAB]

    assert saved(lambda m: completion_logprobs(m, mb, 1.0, False)) == []
    assert saved(lambda m: completion_log_softmax(m, mb, 1.0, False))  # the check sees what it looks for


def test_heads_whose_output_is_not_the_logits_keep_the_whole_log_softmax(tiny: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class Scaled(torch.nn.Linear):
        pass

    model = copy.deepcopy(tiny)
    assert plain_head(model) is model.lm_head
    monkeypatch.setattr(head_mod, "PLAIN_LOGITS", frozenset({"gemma2"}))  # an architecture that caps its logits
    assert plain_head(model) is None
    monkeypatch.undo()
    model.lm_head.__class__ = Scaled  # LoRA's or another wrapper's head
    assert plain_head(model) is None


def test_the_heads_own_instance_forward_comes_back() -> None:
    head = torch.nn.Linear(2, 3)
    head.forward = lambda x: x + 1  # type: ignore[method-assign]  # as accelerate's hooks set one
    with head_outputs_hidden(head) as calls:
        assert torch.equal(head(torch.ones(1, 2)), torch.ones(1, 2)) and calls == [1]
    assert torch.equal(head(torch.ones(1, 2)), torch.full((1, 2), 2.0))


def test_the_head_is_found_through_a_deepspeed_engine_and_a_policy_view(tiny: Any) -> None:
    """A DeepSpeed engine holds the model as ``.module``; a shared base's policy view (arena/learners/adapters.py)
    and a peft model answer ``get_base_model()``; neither has the model's config itself."""

    class Engine(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.module = inner

    class View(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def get_base_model(self) -> Any:
            return self.inner

    model = copy.deepcopy(tiny)
    assert plain_head(Engine(model)) is model.lm_head
    assert plain_head(View(model)) is model.lm_head
    assert plain_head(Engine(View(model))) is model.lm_head
