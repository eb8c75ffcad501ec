"""``learner.skip_inert_rows``: rows whose gradient is 0 (advantage 0 or weight 0, the loss the policy gradient
alone) run in no micro-batch, and the update is the same: every gradient, the loss, and the weights after
AdamW's step, where the batch is all inert included (arena/learners/plan.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import PAD

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.plan import plan_step
from arena.learners.update import Learner
from tolerance import approx32, close32

RULES = list(range(2, 20))


def batch(n: int = 10, seed: int = 5, zero: tuple[int, ...] = (0, 3, 4, 7), weightless: tuple[int, ...] = (8,),
          ) -> list[Sample]:
    """Rows of a shared opening, 1-4 reply tokens, random advantages; the rows ``zero`` have advantage 0, the rows
    ``weightless`` weight 0. Row 4 is a negative zero."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        t = 1 + i % 4
        adv = float(torch.randn(1, generator=gen))
        out.append(Sample(
            prompt_ids=RULES + torch.randint(30, 64, (1 + i % 3,), generator=gen).tolist(),
            completion_ids=torch.randint(1, 64, (t,), generator=gen).tolist(),
            advantage=(-0.0 if i == 4 else 0.0) if i in zero else adv,
            weight=0.0 if i in weightless else 0.5 + float(torch.rand(1, generator=gen)), logprobs=[-1.0] * t,
        ))
    return out


def step(tiny: Any, samples: list[Sample], **cfg: Any) -> tuple[torch.Tensor, dict[str, float], int, torch.Tensor]:
    """One learner step on a copy of ``tiny``: the flat gradient before AdamW's step, the stats, the rows the
    forwards ran (batch rows, summed over calls), and the flat weights after the step."""
    model = copy.deepcopy(tiny)
    learner = Learner(model, LearnerConfig(**({"lr": 1e-2, "beta": 0.0, "token_budget": 60} | cfg)), PAD, 0.9)
    rows = [0]
    handle = model.register_forward_pre_hook(lambda _m, _a, kw: rows.__setitem__(0, rows[0] + kw["input_ids"].shape[0]),
                                             with_kwargs=True)
    grads: list[torch.Tensor] = []
    step_ = learner._optimizer_step

    def capture() -> float:
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]).clone())
        return step_()

    learner._optimizer_step = capture  # type: ignore[method-assign]
    stats = learner.step(samples)
    handle.remove()
    return grads[0], stats, rows[0], torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize("loss", ["clipped", "reinforce"])
@pytest.mark.parametrize("epochs", [1, 2])
def test_inert_rows_are_not_run_and_the_update_is_the_same(tiny: Any, loss: str, epochs: int) -> None:
    samples = batch()
    cfg = dict(loss=loss, updates_per_batch=epochs, share_prompt_prefix=False)
    g_all, s_all, rows_all, w_all = step(tiny, samples, skip_inert_rows=False, **cfg)
    g_skip, s_skip, rows_skip, w_skip = step(tiny, samples, **cfg)  # on by default
    assert s_skip["rows_skipped"] == 5 and "rows_skipped" not in s_all
    assert rows_skip == rows_all - 5 * epochs  # the five inert rows, in no forward of any epoch
    assert s_skip["samples"] == s_all["samples"] == 10 and s_skip["tokens"] == s_all["tokens"]
    assert g_all.abs().sum() > 0
    close32(g_skip, g_all)
    close32(w_skip, w_all)
    for key in ("loss", "pg_loss"):
        assert s_skip[key] == approx32(s_all[key])


def test_an_all_inert_batch_runs_and_adam_steps_as_before(tiny: Any) -> None:
    """Every row inert: they all run, so every weight has its zero gradient and AdamW decays it as before."""
    samples = batch(zero=tuple(range(10)), weightless=())
    g_all, _, rows_all, w_all = step(tiny, samples, skip_inert_rows=False, weight_decay=0.1)
    g_skip, s_skip, rows_skip, w_skip = step(tiny, samples, weight_decay=0.1)
    assert rows_skip == rows_all and s_skip["rows_skipped"] == 0
    assert g_skip.abs().sum() == g_all.abs().sum() == 0
    close32(w_skip, w_all)
    assert not torch.equal(w_all, torch.cat([p.detach().flatten() for p in tiny.parameters()]))  # decay moved them


@pytest.mark.parametrize("extra", [dict(beta=0.05), dict(token_entropy=0.01),
                                   dict(magnet={"kind": "base", "coef": 0.1}), dict(skip_inert_rows=False)])
def test_rows_run_whenever_another_term_reads_them(tiny: Any, extra: dict[str, Any]) -> None:
    """A KL, an entropy bonus or a magnet has a gradient at a row of advantage 0: nothing is left out."""
    cfg = LearnerConfig(**({"lr": 1e-3, "beta": 0.0} | extra))
    ref = copy.deepcopy(tiny).requires_grad_(False) if cfg.beta > 0 else None
    learner = Learner(copy.deepcopy(tiny), cfg, PAD, 0.9, ref)
    assert not learner._skips_inert()
    stats = learner.step(batch())
    assert "rows_skipped" not in stats


def test_plan_leaves_out_only_the_inert_rows_of_this_rank() -> None:
    samples = batch()
    cfg = LearnerConfig(lr=1e-3, token_budget=60)
    plan = plan_step(samples, cfg, None, PAD, torch.device("cpu"), skip_inert=True)
    assert sorted(i for mb in plan.micro for i in mb.index) == [1, 2, 5, 6, 9] and plan.n_skipped == 5
    assert plan.n_seqs == 10 and plan.n_tokens == sum(len(s.completion_ids) for s in samples)
    mine = plan_step(samples, cfg, [0, 1, 2, 3], PAD, torch.device("cpu"), skip_inert=True)
    assert sorted(i for mb in mine.micro for i in mb.index) == [1, 2] and mine.n_skipped == 2
    assert mine.n_seqs == 10  # the totals are the whole batch's
