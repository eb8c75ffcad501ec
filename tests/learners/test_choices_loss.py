"""Replies chosen among a request's choices (``action_mode: score``) train on the policy that plays:
``log P(i) = l_i - logsumexp_j l_j`` (``normalise_choices`` in arena/learners/losses.py), checked against
hand values and against a reference loop over whole sequences."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from tiny_model import flat_grad, seq_log_softmax

from arena.core.types import Sample
from arena.learners.batch import choice_budget, pack
from arena.learners.losses import choice_entropy, normalise_choices
from tolerance import approx32, close32, within

T = 0.9
PROMPTS = [[5, 6, 7, 8], [5, 6, 9], [5, 6, 7, 11, 12], [5, 13]]
CHOICES = [[20, 1], [21, 22, 1], [23, 1]]  # three "action names", each ending in an end token


def samples() -> list[Sample]:
    """Four chosen replies with their alternatives (rows 0-2), and one generated reply (row 3)."""
    out = []
    for r, prompt in enumerate(PROMPTS[:3]):
        i = r % 3
        out.append(Sample(prompt_ids=prompt, completion_ids=CHOICES[i], advantage=[1.0, -0.5, 2.0][r],
                          weight=[1.0, 0.5, 1.5][r], logprobs=[-1.0] * len(CHOICES[i]),
                          alternatives=[c for j, c in enumerate(CHOICES) if j != i]))
    out.append(Sample(prompt_ids=PROMPTS[3], completion_ids=[30, 31, 1], advantage=-1.0, logprobs=[-1.0] * 3))
    return out


def test_normalise_choices_by_hand() -> None:
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0], [-3.0, -1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    # row 0 (l = -3) has alternatives -1 and -4; row 1 none; row 2 (l = -5) has -5.
    out = normalise_choices(logp, mask, torch.tensor([-1.0, -4.0, -5.0]), [0, 0, 2])
    lse0 = torch.logsumexp(torch.tensor([-3.0, -1.0, -4.0]), 0)
    lse2 = torch.logsumexp(torch.tensor([-5.0, -5.0]), 0)
    want = torch.tensor([[-1.0, -2.0 - lse0, 0.0], [-0.5, 0.0, 0.0], [-3.0, -1.0, -1.0 - lse2]])
    torch.testing.assert_close(out, want)
    assert float((out[2] * mask[2]).sum()) == pytest.approx(float(torch.log(torch.tensor(0.5))))  # two equal choices
    assert float((out[0] * mask[0]).sum()) == pytest.approx(-3.0 - float(lse0))


def test_choice_entropy_by_hand() -> None:
    # row 0: l = -3 with alternatives -1 and -4; row 1: none; row 2: l = -5 with -5 (two equal choices)
    got = choice_entropy(torch.tensor([-3.0, -0.5, -5.0]), torch.tensor([-1.0, -4.0, -5.0]), [0, 0, 2])
    p = torch.softmax(torch.tensor([-3.0, -1.0, -4.0]), 0)
    want = torch.stack([-(p * p.log()).sum(), torch.tensor(0.0), torch.log(torch.tensor(2.0))])
    torch.testing.assert_close(got, want)
    assert float(got[0]) == within(0.5243, 1e-4, "written to 4 decimals")  # p = (0.1142, 0.8438, 0.0420)
    sure = choice_entropy(torch.tensor([0.0]), torch.tensor([-60.0]), [0])  # a saturated choice: about 0
    assert float(sure[0]) < 1e-20


def reference_gradient(tiny: Any, batch: list[Sample], entropy: float = 0.0) -> torch.Tensor:
    """REINFORCE at ratio 1, token-mean aggregation: ``sum_s -A_s w_s log P_s / n_tokens``, with ``log P_s``
    the chosen reply's ``l_i - logsumexp_j l_j`` for a chosen reply and ``l`` for a generated one; with
    ``entropy``, minus ``entropy`` x the mean over chosen replies of ``H(softmax(l))``."""
    model = copy.deepcopy(tiny)
    n_tokens = sum(len(s.completion_ids) for s in batch)
    n_choices = sum(bool(s.alternatives) for s in batch)
    loss = torch.zeros(())
    for s in batch:
        def total(completion: list[int], prompt: list[int] = s.prompt_ids) -> torch.Tensor:
            logp = seq_log_softmax(model, prompt, completion, T)
            return logp.gather(-1, torch.tensor(completion)[:, None]).sum()

        l_chosen = total(s.completion_ids)
        log_p = l_chosen
        if s.alternatives:
            every = torch.stack([l_chosen, *[total(a) for a in s.alternatives]])
            log_p = l_chosen - torch.logsumexp(every, 0)
            q = torch.log_softmax(every, 0)
            loss = loss + entropy * (q.exp() * q).sum() / n_choices
        loss = loss - s.advantage * s.weight * log_p / n_tokens
    loss.backward()
    return flat_grad(model)


def test_the_token_budget_counts_the_alternatives_run_beside_a_micro_batch() -> None:
    """A sample with k alternatives costs 1 + k rows: each micro-batch, alternatives included, stays in budget."""
    def sample(p: int, k: int) -> Sample:
        return Sample(prompt_ids=list(range(p)), completion_ids=[1, 2], advantage=1.0, phase="move",
                      alternatives=[[3]] * k)

    assert choice_budget([sample(10, 0)] * 3, 8192) == 8192
    assert choice_budget([], 8192) == 8192  # no samples, no alternatives
    assert choice_budget([sample(10, 0), sample(10, 2), sample(10, 1)], 8192) == 8192 // 3
    assert choice_budget([sample(10, 5)], 4) == 1  # never 0: a row always fits alone
    batch = [sample(40 + i % 7, i % 3) for i in range(30)]
    budget = choice_budget(batch, 600)
    for group in pack(batch, budget):
        rows = [batch[i] for i in group]
        width = max(len(r.prompt_ids) for r in rows) + max(len(r.completion_ids) for r in rows)
        assert len(group) == 1 or width * sum(1 + len(r.alternatives) for r in rows) <= 600


@pytest.mark.parametrize("budget", [10_000, 6])  # 6: a sample or two per micro-batch
def test_the_gradient_is_that_of_the_normalised_choice(tiny: Any, learner_gradient: Any, budget: int) -> None:
    batch = samples()
    want = reference_gradient(tiny, batch)
    got, stats = learner_gradient(batch, temperature=T, loss="reinforce", token_budget=budget,
                                  share_prefix_min_tokens=1)
    assert budget > 100 or stats["micro_batches"] >= 3
    close32(got, want)
    # The unnormalised likelihood (the alternatives ignored) is a different gradient: the check can fail.
    plain = [s.model_copy(update={"alternatives": []}) for s in batch]
    assert (reference_gradient(tiny, plain) - want).abs().max() > 100 * 1e-6


def test_clipped_loss_with_two_epochs_and_kl_sees_the_normalised_choice(tiny: Any, learner_gradient: Any) -> None:
    """The old and reference passes normalise too: at the first epoch the ratio is 1 and the KL to a
    reference equal to the model is 0, so the clipped loss's gradient equals REINFORCE's."""
    batch = samples()
    reinforce, _ = learner_gradient(batch, temperature=T, loss="reinforce")
    clipped, stats = learner_gradient(batch, temperature=T, loss="clipped", beta=0.1, kl_estimator="k3")
    close32(clipped, reinforce)
    assert stats["kl"] == approx32(0.0) and stats["clip_frac"] == 0.0


@pytest.mark.parametrize("budget", [10_000, 6])
def test_the_entropy_bonus_is_the_mean_choice_entropy(tiny: Any, learner_gradient: Any, budget: int) -> None:
    """learner.choice_entropy: the gradient gains that of -coef x mean_r H_r over the batch's chosen replies,
    micro-batched as full-batch; the logged choice_entropy is that mean."""
    batch = samples()
    want = reference_gradient(tiny, batch, entropy=0.3)
    got, stats = learner_gradient(batch, temperature=T, loss="reinforce", token_budget=budget,
                                  share_prefix_min_tokens=1, choice_entropy=0.3)
    close32(got, want)
    assert (want - reference_gradient(tiny, batch)).abs().max() > 100 * 1e-6  # the bonus does move the gradient
    assert 0.0 < stats["choice_entropy"] < float(torch.log(torch.tensor(3.0)))


def test_descent_samples_give_exploitability_descents_gradient(tiny: Any, learner_gradient: Any) -> None:
    """train.descent (arena/loop/components/descent.py): one sample per choice with advantage A(a) = c pi(a) (q(a) - v)
    (``action_advantages``) gives the gradient of ED's loss ``-c sum_a pi(a) sg(q(a) - v)``, pi the normalised
    choice (Lockhart et al., 2019), here divided by the batch's token count as token aggregation does."""
    from arena.games.openspiel.descent import action_advantages

    model = copy.deepcopy(tiny)
    prompt, q, c = PROMPTS[0], [1.5, -0.5, 0.25], 0.4

    def l(completion: list[int]) -> torch.Tensor:
        logp = seq_log_softmax(model, prompt, completion, T)
        return logp.gather(-1, torch.tensor(completion)[:, None]).sum()

    pi = torch.softmax(torch.stack([l(ch) for ch in CHOICES]), 0)
    adv = action_advantages(pi.detach().tolist(), q, c)
    n_tokens = sum(len(ch) for ch in CHOICES)
    values = torch.tensor(q) - float(pi.detach() @ torch.tensor(q))
    (-c * (pi * values).sum() / n_tokens).backward()
    want = flat_grad(model)
    batch = [Sample(prompt_ids=prompt, completion_ids=ch, advantage=adv[i],
                    alternatives=[o for j, o in enumerate(CHOICES) if j != i]) for i, ch in enumerate(CHOICES)]
    for loss in ("reinforce", "clipped"):
        got, _ = learner_gradient(batch, temperature=T, loss=loss)
        close32(got, want)
    assert want.abs().max() > 1e-4


@pytest.mark.parametrize("share", [False, True])
def test_alternatives_that_are_rows_of_the_batch_are_not_run_again(tiny: Any, learner_gradient: Any, share: bool) -> None:
    """An alternative with the same prompt and completion as a row of its micro-batch takes that row's
    likelihood (exact descent trains every legal action of a state): the model sees each distinct row once,
    and the gradient is still the reference loop's. Here two of a new prompt's three choices are rows, so only
    CHOICES[2] (twice) and the other samples' alternatives run in the extra pass."""
    both = [Sample(prompt_ids=[5, 6, 7, 14], completion_ids=CHOICES[i], advantage=[0.7, -1.2][i],
                   alternatives=[o for j, o in enumerate(CHOICES) if j != i]) for i in (0, 1)]
    batch = both + samples()
    want = reference_gradient(tiny, batch)
    seen: list[int] = []
    hook = tiny.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["input_ids"].shape[0]), with_kwargs=True)
    try:
        got, _ = learner_gradient(batch, temperature=T, loss="reinforce", share_prompt_prefix=share,
                                  share_prefix_min_tokens=1)
        if not share:  # (sharing runs prompts and completions in passes of their own: tests/learners/test_prefix.py)
            assert sum(seen) == len(batch) + 2 + sum(len(s.alternatives) for s in samples())  # 2: CHOICES[2] for each
        close32(got, want)
        seen.clear()
        ed = [s.model_copy(update={"alternatives": [CHOICES[1 - i]]}) for i, s in enumerate(both)]
        learner_gradient(ed, temperature=T, loss="reinforce", share_prompt_prefix=False)
        assert seen == [2]  # one forward of the two rows, no pass for the alternatives
    finally:
        hook.remove()
