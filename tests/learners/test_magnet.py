"""``learner.magnet`` in the learner (arena/learners/magnet.py): the loss's ``coef * KL(pi || rho)`` term has the
gradient of the exact KL over a chosen reply's choices and of the per-token k1/k3 estimate on a generated
reply, computed here by a reference loop over whole sequences; micro-batched as full-batch; the magnet's own
weights score as a frozen model does and leave the model's weights as they were; they move after the step
(previous: reset, ema: mixed); the coefficient anneals; and a run resumed from ``state_dict`` is the straight
run, bit for bit."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
import torch
from tiny_model import PAD, flat_grad, seq_log_softmax, tiny_llama

from arena.core.types import Sample
from arena.learners.config import LearnerConfig
from arena.learners.progress import Progress
from arena.learners.update import Learner
from tolerance import approx32, approx64, close32

T = 0.9
PROMPTS = [[5, 6, 7, 8], [5, 6, 9], [5, 6, 7, 11, 12], [5, 13], [5, 6, 14]]
CHOICES = [[20, 1], [21, 22, 1], [23, 1]]


def samples() -> list[Sample]:
    """Three chosen replies with their alternatives (score mode) and two generated replies (free generation)."""
    out = []
    for r, prompt in enumerate(PROMPTS[:3]):
        out.append(Sample(prompt_ids=prompt, completion_ids=CHOICES[r], advantage=[1.0, -0.5, 2.0][r],
                          weight=[1.0, 0.5, 1.5][r], alternatives=[c for j, c in enumerate(CHOICES) if j != r]))
    out.append(Sample(prompt_ids=PROMPTS[3], completion_ids=[30, 31, 1], advantage=-1.0, weight=0.7))
    out.append(Sample(prompt_ids=PROMPTS[4], completion_ids=[40, 1], advantage=0.5))
    return out


@pytest.fixture(scope="module")
def other() -> Any:
    """The magnet: another tiny model (another seed), so that KL(pi || rho) is far from 0."""
    return tiny_llama(seed=1).requires_grad_(False)


def total(model: Any, prompt: list[int], completion: list[int]) -> torch.Tensor:
    logp = seq_log_softmax(model, prompt, completion, T)
    return logp.gather(-1, torch.tensor(completion)[:, None]).sum()


def reference_gradient(tiny: Any, rho: Any, batch: list[Sample], coef: float, estimator: str = "k3") -> torch.Tensor:
    """REINFORCE at ratio 1 with token-mean aggregation, plus ``coef`` x (the mean over chosen replies of the exact
    ``KL(softmax(l) || softmax(l_rho))`` + the token mean of ``k1``/``k3`` at the generated tokens, each times its
    sample's weight), summed one sequence at a time."""
    model = copy.deepcopy(tiny)
    n_tokens = sum(len(s.completion_ids) for s in batch)
    n_choices = sum(bool(s.alternatives) for s in batch)
    loss = torch.zeros(())
    for s in batch:
        if s.alternatives:
            every = torch.stack([total(model, s.prompt_ids, c) for c in [s.completion_ids, *s.alternatives]])
            with torch.no_grad():
                every_rho = torch.stack([total(rho, s.prompt_ids, c) for c in [s.completion_ids, *s.alternatives]])
            logq, logq_rho = torch.log_softmax(every, 0), torch.log_softmax(every_rho, 0)
            log_p = logq[0]
            loss = loss + coef * (logq.exp() * (logq - logq_rho)).sum() / n_choices
        else:
            ids = torch.tensor(s.completion_ids)[:, None]
            tok = seq_log_softmax(model, s.prompt_ids, s.completion_ids, T).gather(-1, ids).squeeze(-1)
            with torch.no_grad():
                tok_rho = seq_log_softmax(rho, s.prompt_ids, s.completion_ids, T).gather(-1, ids).squeeze(-1)
            d = tok_rho - tok
            kl = -d if estimator == "k1" else torch.exp(d) - d - 1.0
            log_p = tok.sum()
            loss = loss + coef * s.weight * kl.sum() / n_tokens
        loss = loss - s.advantage * s.weight * log_p / n_tokens
    loss.backward()
    return flat_grad(model)


def gradient(tiny: Any, rho: Any, batch: list[Sample], own: bool = False, **cfg: Any) -> tuple[torch.Tensor, dict, Learner]:
    """One step's gradient (the optimizer step skipped). ``own``: an ema magnet whose own weights are ``rho``'s
    (swapped into the model to score), else a base magnet on ``rho`` as the frozen reference."""
    model = copy.deepcopy(tiny)
    cfg = {"lr": 1e-3, "beta": 0.0, "loss": "reinforce", "share_prefix_min_tokens": 1} | cfg
    learner = Learner(model, LearnerConfig(**cfg), PAD, T, None if own else rho)
    if own:
        learner.magnet.weights = [p.detach().clone() for p in rho.parameters()]  # type: ignore[union-attr]
    captured: list[torch.Tensor] = []

    def capture() -> float:
        captured.append(flat_grad(model).clone())
        model.zero_grad(set_to_none=True)
        return 0.0

    learner._optimizer_step = capture  # type: ignore[method-assign]
    stats = learner.step(batch)
    return captured[0], stats, learner


@pytest.mark.parametrize("budget", [10_000, 6])  # 6: a sample or two per micro-batch
@pytest.mark.parametrize("own", [False, True])
def test_the_magnet_term_is_the_gradient_of_kl_to_the_magnet(tiny: Any, other: Any, budget: int, own: bool) -> None:
    batch = samples()
    want = reference_gradient(tiny, other, batch, 0.3)
    got, stats, learner = gradient(tiny, other, batch, own=own, token_budget=budget, magnet={"kind": "ema" if own else "base", "coef": 0.3})
    assert budget > 100 or stats["micro_batches"] >= 3
    close32(got, want)
    assert (want - reference_gradient(tiny, other, batch, 0.0)).abs().max() > 1e-3  # the term moves the gradient
    assert stats["magnet/kl"] > 0.01 and stats["magnet/coef"] == 0.3
    if own:  # rho's weights were in the model for its pass only: the model's own are back, bit for bit
        for p, q in zip(learner.model.parameters(), tiny.parameters(), strict=True):
            assert torch.equal(p, q)


def test_k1_on_generated_replies(tiny: Any, other: Any) -> None:
    batch = samples()[3:]
    got, _, _ = gradient(tiny, other, batch, magnet={"kind": "base", "coef": 0.5, "estimator": "k1"})
    close32(got, reference_gradient(tiny, other, batch, 0.5, estimator="k1"))
    k3, _, _ = gradient(tiny, other, batch, magnet={"kind": "base", "coef": 0.5})
    assert (k3 - got).abs().max() > 1e-4  # the estimator is read


def test_the_coefficient_anneals_over_training(tiny: Any) -> None:
    """linear: coef + (coef_end - coef) f; cosine: coef_end + (coef - coef_end) (1 + cos(pi f)) / 2, f = Progress.fraction."""
    from arena.learners.magnet import Magnet
    from arena.learners.config import MagnetConfig

    lin = Magnet(MagnetConfig(kind="base", coef=0.2, anneal="linear", coef_end=0.05), None)
    assert [lin.coef(Progress(s, 5)) for s in (1, 3, 5)] == approx64([0.2, 0.125, 0.05])
    cos = Magnet(MagnetConfig(kind="base", coef=0.2, anneal="cosine", coef_end=0.05), None)
    assert [cos.coef(Progress(s, 5)) for s in (1, 2, 3, 5)] == approx64(
        [0.2, 0.05 + 0.15 * (1 + 0.5 ** 0.5) / 2, 0.125, 0.05])
    assert lin.coef(None) == 0.2 and Magnet(MagnetConfig(kind="base", coef=0.2), None).coef(Progress(5, 5)) == 0.2


def test_a_zero_coefficient_skips_the_magnet(tiny: Any, other: Any) -> None:
    batch = samples()
    plain, _, _ = gradient(tiny, other, batch)
    cfg = {"kind": "base", "coef": 0.3, "anneal": "linear", "coef_end": 0.0}
    model = copy.deepcopy(tiny)
    learner = Learner(model, LearnerConfig(lr=1e-3, beta=0.0, loss="reinforce", magnet=cfg), PAD, T, other)
    seen: list[int] = []
    hook = other.register_forward_pre_hook(lambda *_: seen.append(1))
    try:
        stats = learner.step(batch, Progress(4, 4))  # the last step: coef_end 0
    finally:
        hook.remove()
    assert not seen and stats["magnet/coef"] == 0.0 and stats["magnet/kl"] == 0.0
    assert plain.abs().max() > 0


def run_steps(model: Any, cfg: LearnerConfig, batches: list[list[Sample]], state: dict | None = None) -> Learner:
    learner = Learner(model, cfg, PAD, T)
    if state is not None:
        learner.load_state_dict(state)
    for b in batches:
        learner.step(b)
    return learner


def test_previous_and_ema_move_after_the_step(tiny: Any) -> None:
    """previous, every 2: rho is the first step's starting weights until the second step ends, then the
    weights after it; ema: rho + mix (w - rho) after each step."""
    batch = samples()
    cfg = dict(lr=1e-2, beta=0.0, updates_per_batch=2)
    start = [p.detach().clone() for p in tiny.parameters()]
    prev = run_steps(copy.deepcopy(tiny), LearnerConfig(**cfg, magnet={"kind": "previous", "coef": 0.3, "every": 2}), [batch])
    for w, s in zip(prev.magnet.weights, start, strict=True):  # type: ignore[union-attr]
        assert torch.equal(w, s)
    prev.step(batch)
    for w, p in zip(prev.magnet.weights, prev.model.parameters(), strict=True):  # type: ignore[union-attr]
        assert torch.equal(w, p.detach())
    ema = run_steps(copy.deepcopy(tiny), LearnerConfig(**cfg, magnet={"kind": "ema", "coef": 0.3, "mix": 0.25}), [batch])
    for w, s, p in zip(ema.magnet.weights, start, ema.model.parameters(), strict=True):  # type: ignore[union-attr]
        close32(w, s + 0.25 * (p.detach() - s))
        assert not torch.equal(p.detach(), s)


@pytest.mark.parametrize("kind", ["previous", "ema", "base"])
def test_a_resumed_run_is_the_straight_run(tiny: Any, kind: str) -> None:
    """Three steps straight against one step, ``state_dict`` through torch.save, a fresh learner on the saved
    weights that loads it, and two more: the same weights and magnet, bit for bit. A resume that forgets the
    magnet (its state dropped) is not the straight run: the check can fail."""
    batches = [samples(), samples()[1:], samples()[:4]]
    every = 2 if kind == "previous" else 1  # (previous every 1 after a step is the model's weights: nothing to forget)
    cfg = LearnerConfig(lr=2e-2, beta=0.0, updates_per_batch=2, magnet={"kind": kind, "coef": 0.5, "mix": 0.5, "every": every})
    straight = run_steps(copy.deepcopy(tiny), cfg, batches)
    first = run_steps(copy.deepcopy(tiny), cfg, batches[:1])
    buffer = io.BytesIO()
    torch.save({"weights": first.model.state_dict(), "state": first.state_dict()}, buffer)

    def resume(keep_magnet: bool) -> Learner:
        buffer.seek(0)
        saved = torch.load(buffer, weights_only=False)
        model = copy.deepcopy(tiny)
        model.load_state_dict(saved["weights"])
        if not keep_magnet:
            saved["state"].pop("magnet")
        return run_steps(model, cfg, batches[1:], saved["state"])

    resumed = resume(True)
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(straight.magnet.weights, resumed.magnet.weights, strict=True):  # type: ignore[union-attr]
        assert torch.equal(a, b)
    assert straight.magnet.steps == resumed.magnet.steps == 3  # type: ignore[union-attr]
    forgot = resume(False)
    assert any(not torch.equal(a, b) for a, b in zip(straight.model.parameters(), forgot.model.parameters(), strict=True))


def test_the_default_config_has_no_magnet_and_no_extra_stats(tiny: Any, other: Any) -> None:
    cfg = LearnerConfig()
    assert cfg.magnet is None and cfg.token_entropy == 0.0 and cfg.bound.move == 0.0 and cfg.bound.saturation == 0.0
    _, stats, learner = gradient(tiny, other, samples())
    assert learner.magnet is None and "magnet" not in learner.state_dict()
    assert not {"magnet/kl", "magnet/coef", "token_entropy", "bound/stopped_frac"} & set(stats)
    assert stats["kl"] == approx32(0.0)
