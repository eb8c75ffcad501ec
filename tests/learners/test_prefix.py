"""Common-prefix sharing (arena/learners/prefix.py, batch.py) on the tiny random Llama: the prefix run
once gives the same log-probs and the same gradient of every parameter as each row run whole."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import PAD, seq_log_softmax

from arena.core.types import Sample
from arena.learners.batch import collate, completion_log_softmax, pack
from tolerance import approx32, close32

RULES = list(range(2, 26))  # 24 shared "rules" tokens


def kuhn_like(n: int = 9, seed: int = 3) -> list[Sample]:
    """Prompts that share RULES, then differ (a card, a history of 1-6 tokens), replies of 1-5 tokens;
    one prompt is RULES plus a single token, one is another row's prompt, whole."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        tail = torch.randint(30, 64, (1 + i % 6,), generator=gen).tolist()
        if i == 1:
            tail = tail[:1]
        prompt = RULES + tail if i != n - 1 else list(out[2].prompt_ids)
        t = 1 + int(torch.randint(0, 5, (1,), generator=gen))
        out.append(Sample(
            prompt_ids=prompt, completion_ids=torch.randint(1, 64, (t,), generator=gen).tolist(),
            advantage=float(torch.randn(1, generator=gen)), weight=0.5 + float(torch.rand(1, generator=gen)),
            logprobs=[-1.0] * t,
        ))
    return out


def test_pack_counts_every_sample_once_and_shares_the_rules() -> None:
    samples = kuhn_like()
    for budget in (10_000, 60, 35):
        groups = pack(samples, budget, share_prompts=True, min_saved=1)
        assert sorted(i for g in groups for i in g) == list(range(len(samples)))
    (group,) = pack(samples, 10_000, share_prompts=True, min_saved=1)
    mb = collate(samples, group, PAD, torch.device("cpu"), min_saved=1)
    assert mb.prefix_len == len(RULES)  # row 1's prompt is RULES + 1 token
    assert collate(samples, group, PAD, torch.device("cpu"), min_saved=10_000).prefix_len == 0


def test_shared_prefix_log_softmax_equals_each_row_alone(tiny: Any) -> None:
    samples = kuhn_like()
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=1)
    assert mb.prefix_len == len(RULES)
    with torch.no_grad():
        shared = completion_log_softmax(tiny, mb, 0.7, share_prompt=True)
        plain = completion_log_softmax(tiny, mb, 0.7, share_prompt=False)
        for r, s in enumerate(samples):
            alone = seq_log_softmax(tiny, s.prompt_ids, s.completion_ids, 0.7)
            close32(shared[r, : len(s.completion_ids)], alone)
    mask = mb.completion_mask.bool()
    close32(shared[mask], plain[mask])


def _grads(tiny: Any, samples: list[Sample], **cfg: Any) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
    """Every parameter's gradient after one learner step (the optimizer step skipped), the stats, and
    the token positions the model's forwards ran."""
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner

    model = copy.deepcopy(tiny)
    ref = copy.deepcopy(tiny).requires_grad_(False) if cfg.get("beta", 0.0) > 0 else None
    learner = Learner(model, LearnerConfig(**({"lr": 1e-3, "beta": 0.0} | cfg)), PAD, 0.9, ref)
    grads: list[dict[str, torch.Tensor]] = []
    positions = [0]

    def count(_module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        positions[0] += kwargs["input_ids"].numel()

    handles = [m.register_forward_pre_hook(count, with_kwargs=True) for m in (model, ref) if m is not None]

    def capture() -> float:
        grads.append({k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None})
        model.zero_grad(set_to_none=True)
        return 0.0

    learner._optimizer_step = capture  # type: ignore[method-assign]
    stats = learner.step(samples)
    for h in handles:
        h.remove()
    return grads[0], stats, positions[0]


@pytest.mark.parametrize("epochs", [1, 2])  # 2: the old log-probs come from their own (shared) pass
@pytest.mark.parametrize("budget", [10_000, 90])  # 90: several micro-batches
def test_shared_prefix_gradient_equals_the_unshared_gradient(tiny: Any, epochs: int, budget: int) -> None:
    """Every parameter's gradient, the loss and the KL (reference pass shared too) agree in float32."""
    samples = kuhn_like()
    cfg = dict(beta=0.05, kl_estimator="k3", loss="clipped", updates_per_batch=epochs, token_budget=budget,
               share_prefix_min_tokens=1)
    plain, s_plain, n_plain = _grads(tiny, samples, share_prompt_prefix=False, **cfg)
    shared, s_shared, n_shared = _grads(tiny, samples, share_prompt_prefix=True, **cfg)
    assert plain.keys() == shared.keys() and len(plain) == sum(1 for _ in tiny.parameters())
    for name, g in plain.items():
        assert g.abs().sum() > 0, name
        close32(shared[name], g, msg=name)
    for key in ("loss", "pg_loss", "kl", "clip_frac"):
        assert s_shared[key] == approx32(s_plain[key])
    assert n_shared < 0.75 * n_plain  # the rules ran once per micro-batch, not once per row


def test_full_batch_equals_micro_batches_with_sharing(tiny: Any) -> None:
    samples = kuhn_like()
    cfg = dict(beta=0.0, loss="reinforce", share_prompt_prefix=True, share_prefix_min_tokens=1)
    whole, s_whole, _ = _grads(tiny, samples, token_budget=10_000, **cfg)
    split, s_split, _ = _grads(tiny, samples, token_budget=60, **cfg)
    assert s_whole["micro_batches"] == 1 < s_split["micro_batches"]
    for name, g in whole.items():
        close32(split[name], g, msg=name)


def repeated_prompts() -> list[Sample]:
    """kuhn_like's first four prompts, each with 2-3 replies (every legal action of a state, as exact
    descent trains), shuffled so that a prompt's rows are not adjacent."""
    base = kuhn_like()[:4]
    out = [s.model_copy(update={"completion_ids": s.completion_ids[:1 + j] + [60 + j], "logprobs": [],
                                 "advantage": s.advantage - j})
           for j in range(3) for s in base if j < 2 or len(s.prompt_ids) > 25]
    return out[::2] + out[1::2]


@pytest.mark.parametrize("min_saved", [1, 10_000])  # 10_000: no common prefix, only the repeated prompts
def test_repeated_prompts_run_once_with_the_values_and_gradients_of_each_row(tiny: Any, min_saved: int) -> None:
    samples = repeated_prompts()
    mb = collate(samples, list(range(len(samples))), PAD, torch.device("cpu"), min_saved=min_saved)
    assert mb.prompt_of is not None and max(mb.prompt_of) == 3 and mb.prefix_len == (len(RULES) if min_saved == 1 else 0)
    assert [samples[r].prompt_ids for r in range(len(samples))] == [samples[mb.prompt_of.index(j)].prompt_ids
                                                                     for j in mb.prompt_of]
    with torch.no_grad():
        shared = completion_log_softmax(tiny, mb, 0.7, share_prompt=True)
        for r, s in enumerate(samples):
            alone = seq_log_softmax(tiny, s.prompt_ids, s.completion_ids, 0.7)
            close32(shared[r, : len(s.completion_ids)], alone)
    cfg = dict(loss="reinforce", token_budget=10_000, share_prefix_min_tokens=min_saved)
    plain, _, n_plain = _grads(tiny, samples, share_prompt_prefix=False, **cfg)
    shared_g, _, n_shared = _grads(tiny, samples, share_prompt_prefix=True, **cfg)
    for name, g in plain.items():
        close32(shared_g[name], g, msg=name)
    width = mb.input_ids.shape[1] - mb.completion_ids.shape[1]  # the longest prompt: 4 prompts, then the replies
    c = mb.prefix_len
    assert n_shared == c + 4 * (width - c) + len(samples) * mb.completion_ids.shape[1] < n_plain


def test_one_prompt_for_every_row_runs_once(tiny: Any) -> None:
    """All rows on one prompt (LSP's solvers): the prompt runs as one row, whatever the common prefix."""
    s = kuhn_like()[3]
    samples = [s.model_copy(update={"completion_ids": [40 + j, 41, 42][: 1 + j % 3], "logprobs": []}) for j in range(5)]
    mb = collate(samples, list(range(5)), PAD, torch.device("cpu"), min_saved=1)
    assert mb.prompt_of == [0] * 5 and mb.shared_prompt
    with torch.no_grad():
        shared = completion_log_softmax(tiny, mb, 1.0, share_prompt=True)
    for r, row in enumerate(samples):
        alone = seq_log_softmax(tiny, row.prompt_ids, row.completion_ids, 1.0)
        close32(shared[r, : len(row.completion_ids)], alone)
