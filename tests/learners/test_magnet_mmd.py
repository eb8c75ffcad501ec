"""The magnet on a 2x2 zero-sum matrix game, exactly (arena/algorithms/mmd.py): plain simultaneous policy
gradient cycles in the last iterate; with the magnet (magnetic mirror descent's closed form, and the
learner's own KL term as a gradient on softmax logits) the last iterate converges to the alpha-regularised
equilibrium, found independently by bisection; a moving magnet closes the gap to Nash.

The game is a biased matching pennies, ``A = [[3, -1], [-2, 1]]``: its Nash equilibrium (3/7, 2/7) is not
uniform, nor is its regularised equilibrium, nor are they equal, so no check passes by symmetry."""

from __future__ import annotations

import numpy as np
import torch

from arena.algorithms import mmd
from arena.learners.config import MagnetConfig
from arena.learners.magnet import Magnet
from arena.learners.regularisers import choice_kl, choice_log_softmax
from tolerance import apart, approx64, close64, within

A = np.array([[3.0, -1.0], [-2.0, 1.0]])
X0, Y0 = np.array([0.8, 0.2]), np.array([0.3, 0.7])
CONVERGED = "a contraction run for thousands of steps: the distance to the fixed point is at rounding (measured 1e-15)"


def test_the_game_and_its_equilibria_by_hand() -> None:
    x, y = mmd.nash_2x2(A)
    assert x.tolist() == approx64([3 / 7, 4 / 7]) and y.tolist() == approx64([2 / 7, 5 / 7])
    assert mmd.exploitability(A, x, y) == approx64(0.0, scale=3.0)
    # uniform: A y = (1, -0.5), x A = (0.5, 0): (1 - 0) / 2
    assert mmd.exploitability(A, np.full(2, 0.5), np.full(2, 0.5)) == approx64(0.5)
    xq, yq = mmd.qre_2x2(A, 0.5)
    # the fixed point: each policy is rho * exp(q / alpha), normalised, against the other's
    close64(xq, mmd.logit_response(A @ yq, np.full(2, 0.5), 0.5))
    close64(yq, mmd.logit_response(-A.T @ xq, np.full(2, 0.5), 0.5))
    assert abs(xq[0] - 0.5) > 0.05 or abs(yq[0] - 0.5) > 0.05  # not uniform
    assert abs(xq[0] - x[0]) > 0.05  # not Nash: regularised
    assert mmd.exploitability(A, xq, yq) > 0.05


def test_the_mmd_step_maximises_its_objective() -> None:
    """``pi' = mmd_step(...)`` maximises ``<pi', q> - alpha KL(pi' || rho) - KL(pi' || pi) / eta`` on the simplex:
    its gradient there, ``q - alpha (log pi' - log rho + 1) - (log pi' - log pi + 1) / eta``, is the same for
    every action (the Lagrange condition), and a perturbation along the simplex lowers the objective."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        pi, rho = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3))
        q, alpha, eta = rng.normal(size=3), float(rng.uniform(0.05, 2)), float(rng.uniform(0.05, 2))
        new = mmd.mmd_step(pi, q, rho, alpha, eta)
        grad = q - alpha * (np.log(new) - np.log(rho) + 1) - (np.log(new) - np.log(pi) + 1) / eta
        assert (grad - grad.mean()).tolist() == approx64([0.0] * 3, scale=float(np.abs(grad).max()))

        def objective(p: np.ndarray) -> float:
            return float(p @ q - alpha * p @ (np.log(p) - np.log(rho)) - p @ (np.log(p) - np.log(pi)) / eta)

        h = 0.1 * float(new.min())  # stays inside the simplex
        for d in (np.array([1.0, -1.0, 0.0]), np.array([0.0, 1.0, -1.0])):
            assert objective(new + h * d) < objective(new) and objective(new - h * d) < objective(new)


def test_plain_policy_gradient_cycles_in_the_last_iterate() -> None:
    """alpha = 0: simultaneous softmax policy gradient (and mirror descent) circle Nash without reaching it:
    over the last 1,000 of 5,000 steps the last iterate swings from near Nash to over 0.4 away, while the
    average of the iterates is near Nash (what fictitious play and NFSP rely on)."""
    nash, _ = mmd.nash_2x2(A)
    for trace in (mmd.play(A, X0, Y0, lambda s, q, r: mmd.softmax_pg_step(s, q, r, 0.0, 0.1), 5000, logits=True),
                  mmd.play(A, X0, Y0, lambda s, q, r: mmd.mmd_step(s, q, r, 0.0, 0.1), 5000)):
        far = np.abs(trace.x[-1000:, 0] - nash[0])
        assert far.max() > 0.4 and far.min() < 0.05
        assert abs(trace.x.mean(0)[0] - nash[0]) < 0.02


def test_the_magnet_converges_to_the_regularised_equilibrium() -> None:
    """alpha > 0 with a uniform magnet: MMD's closed form and the softmax policy gradient with the KL term
    (the learner's deep form) both end at the bisection's regularised equilibrium, in the last iterate."""
    for alpha, eta in ((0.5, 0.05), (0.2, 0.05)):
        xq, yq = mmd.qre_2x2(A, alpha)
        closed = mmd.play(A, X0, Y0, lambda s, q, r: mmd.mmd_step(s, q, r, alpha, eta), 6000)
        deep = mmd.play(A, X0, Y0, lambda s, q, r: mmd.softmax_pg_step(s, q, r, alpha, 2 * eta), 6000, logits=True)
        for trace in (closed, deep):
            assert trace.x[-1].tolist() == within(xq.tolist(), 1e-9, CONVERGED)
            assert trace.y[-1].tolist() == within(yq.tolist(), 1e-9, CONVERGED)


def test_a_moving_magnet_closes_the_gap_to_nash() -> None:
    """The magnet moved toward the policy, geometrically every step (rho <- rho^0.95 pi^0.05) or reset every
    100 steps (R-NaD), takes the last iterate to Nash; a fixed one leaves it at the regularised equilibrium's
    exploitability."""
    step = lambda s, q, r: mmd.mmd_step(s, q, r, 0.5, 0.05)  # noqa: E731
    fixed = mmd.play(A, X0, Y0, step, 4000)
    # the figure docs/guides/training.md quotes
    assert mmd.exploitability(A, fixed.x[-1], fixed.y[-1]) == within(0.068, 5e-4, "quoted to 3 decimals")
    for mix, every in ((0.05, 1), (1.0, 100)):
        moving = mmd.play(A, X0, Y0, step, 4000, mix=mix, every=every)
        assert mmd.exploitability(A, moving.x[-1], moving.y[-1]) == within(0.0, 1e-8, CONVERGED)


def kl_gradient_torch(pi: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The learner's choice KL (arena/learners/regularisers.py) on one decision, differentiated by autograd
    with respect to the logits: the chosen reply's ``l`` first, then its alternatives, as the learner lays them."""
    theta = torch.tensor(np.log(pi), dtype=torch.float64, requires_grad=True)
    rho_l = torch.tensor(np.log(rho), dtype=torch.float64)
    owner = [0] * (len(pi) - 1)
    logq, valid = choice_log_softmax(theta[:1], theta[1:], owner)
    logq_ref, _ = choice_log_softmax(rho_l[:1], rho_l[1:], owner)
    choice_kl(logq, logq_ref, valid).sum().backward()
    return theta.grad.numpy()  # type: ignore[union-attr]


def test_the_learners_kl_term_has_the_magnet_gradient() -> None:
    """``d KL(pi || rho) / d theta = pi (g - pi.g)``, ``g = log pi - log rho``: the learner's term, by autograd,
    against the closed form and against central differences of KL itself."""
    rng = np.random.default_rng(1)
    for k in (2, 3, 5):
        pi, rho = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k))
        got = kl_gradient_torch(pi, rho)
        close64(torch.tensor(got), torch.tensor(mmd.kl_logit_gradient(pi, rho)))

        def kl(theta: np.ndarray) -> float:
            p = mmd.normalise(theta)
            return float(p @ (np.log(p) - np.log(rho)))

        h, theta = 1e-6, np.log(pi)
        numeric = [(kl(theta + h * e) - kl(theta - h * e)) / (2 * h) for e in np.eye(k)]
        assert got.tolist() == within(numeric, 1e-8, "central differences at h = 1e-6: O(h^2) plus 1e-16 / h")


def test_the_learners_kl_term_drives_the_game_to_the_regularised_equilibrium() -> None:
    """Simultaneous ascent on ``<pi, q> - alpha KL(pi || rho)`` with the KL's gradient taken from the learner's
    own function (autograd through ``choice_kl``), the policy-gradient part exact: the last iterate converges to
    the regularised equilibrium; without the term (the same steps, numpy) it circles."""
    def update(theta: np.ndarray, q: np.ndarray, rho: np.ndarray) -> np.ndarray:
        pi = mmd.normalise(theta)
        return theta + 0.2 * (mmd.pg_logit_gradient(pi, q) - 0.5 * kl_gradient_torch(pi, rho))

    xq, yq = mmd.qre_2x2(A, 0.5)
    trace = mmd.play(A, X0, Y0, update, 800, logits=True)
    assert trace.x[-1].tolist() == within(xq.tolist(), 1e-9, CONVERGED)
    assert trace.y[-1].tolist() == within(yq.tolist(), 1e-9, CONVERGED)
    plain = mmd.play(A, X0, Y0, lambda s, q, r: mmd.softmax_pg_step(s, q, r, 0.0, 0.2), 800, logits=True)
    assert np.abs(plain.x[-400:, 0] - xq[0]).max() > 0.3


def test_an_ema_of_logits_is_geometric_mixing() -> None:
    """The ``ema`` magnet mixes weights: for a tabular softmax, whose weights are its logits, that is exactly
    MMD's geometric move ``rho <- rho^(1-mix) pi^mix`` (normalised), as ``mmd.play`` moves its magnet."""
    rng = np.random.default_rng(2)
    z_rho, z_pi = rng.normal(size=4), rng.normal(size=4)
    magnet = Magnet(MagnetConfig(kind="ema", coef=0.1, mix=0.05, every=2), None)
    logits = torch.tensor(z_rho)
    magnet.start([logits])
    magnet.after_step([torch.tensor(z_pi)])  # step 1 of every 2: no move
    close64(magnet.weights[0].double(), torch.tensor(z_rho).float().double())  # type: ignore[index]
    magnet.after_step([torch.tensor(z_pi)])
    mixed = torch.softmax(magnet.weights[0].double(), 0).numpy()  # type: ignore[index]
    rho, pi = mmd.normalise(z_rho), mmd.normalise(z_pi)
    want = mmd.normalise(0.95 * np.log(rho) + 0.05 * np.log(pi))
    assert mixed.tolist() == within(want.tolist(), 1e-6, "the magnet's weights are float32 (2^-24 relative)")
    assert apart(mixed, 0.95 * rho + 0.05 * pi, 1e-4)  # not the arithmetic mixture: the check can tell
