"""Magnetic mirror descent and plain policy gradient on a two-player zero-sum matrix game, exactly.

The reference the learner's magnet (``learner.magnet``, arena/learners/magnet.py) is checked against
(tests/learners/test_magnet_mmd.py). A matrix game is ``A (n, m)``, the row player's payoff; the column
player gets ``-A``. Policies are probability vectors ``x (n,)`` and ``y (m,)``; each player's action values
are ``q_x = A y`` and ``q_y = -A^T x``. Every gradient here is the exact expectation the learner's sampled
policy gradient estimates, so nothing is sampled.

- :func:`mmd_step`: magnetic mirror descent's closed form at one decision (Sokota et al., 2022, arXiv
  2206.05825, the negative-entropy mirror map): ``pi' ∝ [pi rho^(alpha eta) exp(eta q)]^(1 / (1 + alpha eta))``,
  the maximiser of ``<pi', q> - alpha KL(pi' || rho) - KL(pi' || pi) / eta``;
- :func:`softmax_pg_step`: simultaneous gradient ascent on softmax logits, ``theta += lr (x (q - x.q) - alpha
  x (g - x.g))`` with ``g = log x - log rho``: the policy gradient plus the gradient of ``-alpha KL(x || rho)``,
  the deep form of MMD that the learner trains (alpha 0: plain policy gradient, which cycles);
- :func:`play`: either update for both players at once, the magnet fixed, moved geometrically every
  ``every`` steps (``rho <- rho^(1-mix) pi^mix``; mix 1: reset, R-NaD) ;
- :func:`qre_2x2`: the alpha-regularised equilibrium of a 2x2 game (the fixed point ``x ∝ rho_x exp(q_x / alpha)``,
  ``y ∝ rho_y exp(q_y / alpha)``, a logit quantal-response equilibrium centred on the magnet) by bisection,
  an algorithm independent of the two above; :func:`nash_2x2` the Nash equilibrium of a 2x2 game without a
  pure one; :func:`exploitability`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Array = np.ndarray


def normalise(log_weights: Array) -> Array:
    """``softmax(log_weights)``, the probability vector proportional to ``exp(log_weights)``."""
    z = np.exp(log_weights - log_weights.max())
    return z / z.sum()


def mmd_step(pi: Array, q: Array, rho: Array, alpha: float, eta: float) -> Array:
    """``pi' ∝ [pi * rho^(alpha eta) * exp(eta q)]^(1 / (1 + alpha eta))`` (Sokota et al., 2022): one step of
    magnetic mirror descent at one decision with action values ``q``, magnet ``rho``, regularisation
    ``alpha`` and step size ``eta``."""
    return normalise((np.log(pi) + alpha * eta * np.log(rho) + eta * q) / (1.0 + alpha * eta))


def kl_logit_gradient(pi: Array, rho: Array) -> Array:
    """``d KL(pi || rho) / d theta`` for ``pi = softmax(theta)``: ``pi * (g - pi.g)``, ``g = log pi - log rho``."""
    g = np.log(pi) - np.log(rho)
    return pi * (g - pi @ g)


def pg_logit_gradient(pi: Array, q: Array) -> Array:
    """``d <pi, q> / d theta`` for ``pi = softmax(theta)`` (``q`` held fixed): ``pi * (q - pi.q)``, the expected
    policy gradient with the state's value as baseline."""
    return pi * (q - pi @ q)


def softmax_pg_step(theta: Array, q: Array, rho: Array, alpha: float, lr: float) -> Array:
    """One ascent step on the logits ``theta`` of ``<pi, q> - alpha KL(pi || rho)``."""
    pi = normalise(theta)
    return theta + lr * (pg_logit_gradient(pi, q) - alpha * kl_logit_gradient(pi, rho))


def values(a: Array, x: Array, y: Array) -> tuple[Array, Array]:
    """``(q_x, q_y) = (A y, -A^T x)``: each player's action values against the other's policy."""
    return a @ y, -a.T @ x


def exploitability(a: Array, x: Array, y: Array) -> float:
    """NashConv / 2: ``(max_i (A y)_i - min_j (x^T A)_j) / 2``, 0 exactly at a Nash equilibrium."""
    return float(np.max(a @ y) - np.min(x @ a)) / 2.0


@dataclass
class Trace:
    """Both players' policies after each step, ``(steps + 1, n)`` and ``(steps + 1, m)``, the start first."""

    x: Array
    y: Array


def play(a: Array, x0: Array, y0: Array, step: Callable[[Array, Array, Array], Array], steps: int,
         rho: tuple[Array, Array] | None = None, mix: float = 0.0, every: int = 1, logits: bool = False) -> Trace:
    """Both players update at once for ``steps`` steps: ``step(state, q, rho) -> state`` per player, the state a
    policy (``logits`` False: :func:`mmd_step`) or its logits (:func:`softmax_pg_step`). The magnets start at
    ``rho`` (None: uniform) and every ``every`` steps move geometrically, ``rho <- rho^(1-mix) pi^mix``
    normalised (``mix`` 0: fixed; 1: reset to the current policy, R-NaD's regularisation policy)."""
    n, m = a.shape
    rx, ry = rho if rho is not None else (np.full(n, 1.0 / n), np.full(m, 1.0 / m))
    sx, sy = (np.log(x0), np.log(y0)) if logits else (x0, y0)
    pol = normalise if logits else (lambda s: s)
    xs, ys = [pol(sx)], [pol(sy)]
    for t in range(1, steps + 1):
        qx, qy = values(a, xs[-1], ys[-1])
        sx, sy = step(sx, qx, rx), step(sy, qy, ry)
        xs.append(pol(sx))
        ys.append(pol(sy))
        if mix > 0 and t % every == 0:
            rx = normalise((1 - mix) * np.log(rx) + mix * np.log(xs[-1]))
            ry = normalise((1 - mix) * np.log(ry) + mix * np.log(ys[-1]))
    return Trace(np.array(xs), np.array(ys))


def logit_response(q: Array, rho: Array, alpha: float) -> Array:
    """``argmax_pi <pi, q> - alpha KL(pi || rho) = rho * exp(q / alpha)`` normalised."""
    return normalise(np.log(rho) + q / alpha)


def qre_2x2(a: Array, alpha: float, rho: tuple[Array, Array] | None = None) -> tuple[Array, Array]:
    """The alpha-regularised equilibrium of a 2x2 zero-sum game: ``x = logit_response(A y)``,
    ``y = logit_response(-A^T x)``. The row player's probability of its first action ``p`` solves
    ``f(p) = r(y(p)) - p = 0``, with ``f(0) >= 0 >= f(1)``; bisection to the last bit of ``p``."""
    rx, ry = rho if rho is not None else (np.full(2, 0.5), np.full(2, 0.5))

    def respond(p: float) -> tuple[Array, Array]:
        x = np.array([p, 1.0 - p])
        y = logit_response(-a.T @ x, ry, alpha)
        return x, logit_response(a @ y, rx, alpha)

    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if respond(mid)[1][0] > mid:
            lo = mid
        else:
            hi = mid
    x, _ = respond(lo)
    return x, logit_response(-a.T @ x, ry, alpha)


def nash_2x2(a: Array) -> tuple[Array, Array]:
    """The mixed Nash equilibrium of a 2x2 zero-sum game without a pure one: each player makes the other
    indifferent, ``p = (a11 - a10) / d`` and ``s = (a11 - a01) / d`` with ``d = a00 - a01 - a10 + a11``."""
    d = a[0, 0] - a[0, 1] - a[1, 0] + a[1, 1]
    p, s = (a[1, 1] - a[1, 0]) / d, (a[1, 1] - a[0, 1]) / d
    return np.array([p, 1 - p]), np.array([s, 1 - s])
