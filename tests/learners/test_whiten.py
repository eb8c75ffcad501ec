"""``learner.whiten`` (arena/learners/whiten.py): the whitened pushes by hand, the sketch's inner products
against the exact ones, and on a model: whitened advantages move two nearly aligned decisions apart, each by its
own push, as a table would, where the plain ones move them alike."""

from __future__ import annotations

import torch
from tiny_model import tiny_llama

from arena.core.types import Sample
from arena.learners.whiten import Sketcher, WhitenConfig, decision_logprob, solve, whitened
from tolerance import approx64, within


def test_orthogonal_decisions_keep_their_pushes_shrunk_by_the_damping() -> None:
    K = torch.diag(torch.tensor([4.0, 4.0, 4.0], dtype=torch.float64))
    out, cos = solve(K, [[1.0], [-2.0, 1.0], [0.5]], damping=0.25)
    assert out[0] == approx64([1.0 / 1.25]) and out[2] == approx64([0.5 / 1.25])
    # decision 1's push -1 is spread over its samples in proportion to their advantages
    assert out[1] == approx64([-1.0 / 1.25 * 2.0, -1.0 / 1.25 * -1.0]) and cos == approx64(0.0)


def test_aligned_decisions_are_pushed_apart_and_their_mean_less() -> None:
    """Two decisions at cosine 0.99 with pushes +1 and -1 (the card's part): v = (K/kappa + lambda)^-1 u, by hand;
    the difference is amplified 1 / (0.01 + lambda) times, a common push shrunk 1 / (1.99 + lambda) times."""
    K = torch.tensor([[1.0, 0.99], [0.99, 1.0]], dtype=torch.float64)
    lam = 0.1
    apart, cos = solve(K, [[1.0], [-1.0]], lam)
    assert apart == [approx64([1 / (0.01 + lam)]), approx64([-1 / (0.01 + lam)])] and cos == approx64(0.99)
    together, _ = solve(K, [[1.0], [1.0]], lam)
    assert together == [approx64([1 / (1.99 + lam)]), approx64([1 / (1.99 + lam)])]
    zero, _ = solve(K, [[0.5, -0.5], [1.0]], lam)  # pushes that cancel are spread equally
    assert zero[0][0] == zero[0][1]


def test_the_sketch_keeps_inner_products() -> None:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.zeros(300_000)), torch.nn.Parameter(torch.zeros(7, 11_000))]
    a = [torch.randn_like(p) for p in params]
    b = [0.9 * x + 0.3 * torch.randn_like(x) for x in a]
    sketch = Sketcher(params, 2**16, seed=1)

    def sketched(grads: list[torch.Tensor]) -> torch.Tensor:
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        return sketch()

    sa, sb = sketched(a), sketched(b)
    exact = sum(float((x.double() * y.double()).sum()) for x, y in zip(a, b, strict=True))
    norm = (sum(float(x.double().pow(2).sum()) for x in a) * sum(float(y.double().pow(2).sum()) for y in b)) ** 0.5
    assert float(sa @ sb) / norm == within(exact / norm, 0.02, "2**16 buckets: 1/sqrt(m) = 0.004 of the norms")


def gradient(model: torch.nn.Module, s: Sample) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    decision_logprob(model, s, 1.0).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).double()


def test_a_whitened_push_moves_each_decision_by_its_own_advantage() -> None:
    """Two prompts that differ in one token (a card), the same reply chosen among two: Bet is good at one and
    bad at the other. To first order a step along ``sum_i A_i grad f_i`` moves ``f`` by ``K A``: the plain
    advantages move both decisions by about their mean (the prompts' gradients are aligned), the whitened ones by
    their own pushes, up at the king and down at the jack, as a table would (K from exact gradients here; the
    whitening measured it through its sketch)."""
    model = tiny_llama()
    king, jack = [5, 6, 7, 8, 9, 10, 20, 8], [5, 6, 7, 8, 9, 10, 21, 8]
    samples = [Sample(prompt_ids=king, completion_ids=[9, 2], advantage=1.0, alternatives=[[11, 2]]),
               Sample(prompt_ids=jack, completion_ids=[9, 2], advantage=-0.5, alternatives=[[11, 2]])]
    g = torch.stack([gradient(model, s) for s in samples])
    K = g @ g.T
    cos = float(K[0, 1] / (K[0, 0] * K[1, 1]).sqrt())
    assert cos > 0.9, f"the two prompts' gradients are not aligned ({cos:.3f}): the test would show nothing"
    plain = K @ torch.tensor([1.0, -0.5], dtype=torch.float64)
    assert plain[1] > 0, "aligned: the plain step raises Bet at the jack too"
    out, stats, _ = whitened(model, samples, WhitenConfig(damping=1e-3, sketch=2**20), 1.0)
    white = K @ torch.tensor([s.advantage for s in out], dtype=torch.float64)
    kappa = float(K.diagonal().mean())
    assert stats["whiten/decisions"] == 2.0 and stats["whiten/kernel_cos"] == within(cos, 0.02, "a 2**20 sketch")
    assert (white / kappa).tolist() == within([1.0, -0.5], 0.05, "damping 1e-3 and the sketch's error")


def sketch_params() -> list[torch.nn.Parameter]:
    """Weights of 5, 3 and 4 numbers; the middle one has no gradient (a layer the decision did not reach)."""
    params = [torch.nn.Parameter(torch.zeros(n, dtype=torch.float64)) for n in (5, 3, 4)]
    params[0].grad = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)
    params[2].grad = torch.tensor([10.0, 20.0, 30.0, 40.0], dtype=torch.float64)
    return params


def test_the_sketch_puts_weight_n_signed_into_bucket_n_mod_size() -> None:
    """By hand: the flattened model's weight n (a weight without gradient counts as 0 and still takes its place)
    times its sign goes into bucket n mod 4; 12 weights wrap the 4 buckets three times, and the weight without a
    gradient moves the next one's bucket by 3 (not by a multiple of 4, so its step's direction shows)."""
    params = sketch_params()
    sketch = Sketcher(params, 4, seed=3)
    signs = torch.cat([s.double() for s in sketch.signs])
    grads = torch.cat([p.grad if p.grad is not None else torch.zeros(p.numel(), dtype=torch.float64) for p in params])
    want = torch.zeros(4, dtype=torch.float64)
    for n in range(12):
        want[n % 4] += signs[n] * grads[n]
    assert sketch().double().tolist() == approx64(want.tolist())


def test_the_signs_are_fixed_by_the_seed_and_both_occur() -> None:
    params = sketch_params()
    a, b, c = Sketcher(params, 4, seed=3), Sketcher(params, 4, seed=3), Sketcher(params, 4, seed=4)
    flat = lambda s: torch.cat(s.signs).tolist()  # noqa: E731
    assert flat(a) == flat(b) != flat(c)
    assert set(flat(a)) == {-1, 1} and torch.equal(a(), b())


def test_the_mean_cosine_and_an_unpushed_decision_by_hand() -> None:
    """K = [[4, 2, 0], [2, 1, 0], [0, 0, 9]]: cosines 1 (decisions 0 and 1), 0, 0, so the mean over the 6 ordered
    pairs is 2/6. One decision alone: 1. K = [[1, .5], [.5, 1]] undamped, pushes (3) and (1, -1): v = K^-1 (3, 0)
    = (4, -2); the second decision's pushes sum to 0, so each of its 2 samples takes v / 2 = -1."""
    K3 = torch.tensor([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 9.0]], dtype=torch.float64)
    assert solve(K3, [[1.0], [1.0], [1.0]], 0.1)[1] == approx64(1 / 3)
    assert solve(torch.tensor([[2.5]], dtype=torch.float64), [[1.0]], 0.1)[1] == 1.0
    out, mean_cos = solve(torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64), [[3.0], [1.0, -1.0]], 0.0)
    assert out[0] == approx64([4.0]) and out[1] == approx64([-1.0, -1.0]) and mean_cos == approx64(0.5)


def test_the_solve_does_not_depend_on_the_kernels_scale() -> None:
    """K / mean diag(K) and the cosines are unchanged when K is 1e-6 of itself (gradients of a tiny model)."""
    K = torch.tensor([[1.0, 0.3], [0.3, 2.0]], dtype=torch.float64)
    big, small = solve(K, [[1.0, 2.0], [-1.0]], 0.1), solve(K * 1e-6, [[1.0, 2.0], [-1.0]], 0.1)
    assert small[0][0] == approx64(big[0][0]) and small[0][1] == approx64(big[0][1]) and small[1] == approx64(big[1])


def test_the_sketch_sums_in_float64() -> None:
    """Signed weights 1e8, 1 and -1e8 in one bucket: 1 in float64; a float32 sum would lose the 1."""
    params = [torch.nn.Parameter(torch.zeros(1, dtype=torch.float64)) for _ in range(3)]
    sketch = Sketcher(params, 1, seed=0)
    for p, s, g in zip(params, sketch.signs, (1e8, 1.0, -1e8), strict=True):
        p.grad = torch.tensor([g * float(s[0])], dtype=torch.float64)
    assert sketch().tolist() == [1.0]
