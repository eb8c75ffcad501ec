"""arena/stats/heldout.py against hand-computed values (fast; in ``make mutation``): held-out seeds, the
bootstrap interval of a mean, and of a difference of means, paired and unpaired with arms of unequal size.

The unpaired draw resamples each arm with its own size (#53: drawing the second arm with the first arm's size
survived every test, whose arms were all of equal size). Arms whose values are 0 or 1 make the interval a
percentile of a binomial, known by hand: the mean of 12 fair coins lies in [3/12, 9/12] with 95% and more
(P(X <= 2) = 0.019, P(X >= 10) = 0.019), the mean of 3 in [0, 1].
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.stats.heldout import HELD_OUT_BASE, bootstrap, bootstrap_difference, held_out_seeds

COINS12 = [0.0, 1.0] * 6  # mean 1/2; a resampled mean is k/12 with k ~ Binomial(12, 1/2)
ZEROS3 = [0.0, 0.0, 0.0]


def test_held_out_seeds_by_hand() -> None:
    assert held_out_seeds(0, 3) == [2**40, 2**40 + 1, 2**40 + 2]
    assert held_out_seeds(2, 2) == [HELD_OUT_BASE + 2_000_006, HELD_OUT_BASE + 2_000_007] and held_out_seeds(5, 0) == []


def test_bootstrap_of_a_mean_by_hand() -> None:
    assert bootstrap([2.0, 2.0]) == (2.0, 2.0, 2.0)
    assert bootstrap(COINS12) == (0.5, 0.25, 0.75)  # 2000 resamples: the 2.5% and 97.5% percentiles of k/12
    assert bootstrap(COINS12, resamples=4000, seed=9) == (0.5, 0.25, 0.75)
    mean, low, high = bootstrap([0.0, 1.0, 1.0, 1.0], resamples=50, seed=1)
    rng = np.random.default_rng(1)  # the reference: one (resamples, n) block of indices, seeded
    means = np.asarray([0.0, 1.0, 1.0, 1.0])[rng.integers(0, 4, size=(50, 4))].mean(axis=1)
    assert (mean, low, high) == (0.75, *np.percentile(means, [2.5, 97.5]))


@pytest.mark.parametrize("paired", [True, False])
def test_a_difference_of_constant_arms_is_exact(paired: bool) -> None:
    assert bootstrap_difference([3.0, 3.0], [1.0, 1.0], paired=paired) == (2.0, 2.0, 2.0)


def test_unpaired_arms_of_unequal_size_each_resample_their_own_size() -> None:
    """a: 3 zeros (no spread), b: 12 coins. mean(a*) - mean(b*) = -k/12: the interval is [-9/12, -3/12]; with b
    resampled at a's size (3) it would be -k/3 in [-1, 0]. And the other way round."""
    assert bootstrap_difference(ZEROS3, COINS12, paired=False) == (-0.5, -0.75, -0.25)
    assert bootstrap_difference(COINS12, ZEROS3, paired=False) == (0.5, 0.25, 0.75)
    assert bootstrap_difference(ZEROS3, COINS12, paired=False, resamples=3000, seed=4) == (-0.5, -0.75, -0.25)


def test_unpaired_against_a_reference_loop() -> None:
    """The same seeded generator draws a's (resamples, len(a)) block, then b's (resamples, len(b)) block."""
    a, b = [0.1, 0.7, 0.4], [0.3, 0.9, 0.2, 0.5, 0.8, 0.6, 0.0]
    _, low, high = bootstrap_difference(a, b, paired=False, resamples=300, seed=5)
    rng = np.random.default_rng(5)
    i, j = rng.integers(0, 3, size=(300, 3)), rng.integers(0, 7, size=(300, 7))
    ref = np.percentile(np.asarray(a)[i].mean(axis=1) - np.asarray(b)[j].mean(axis=1), [2.5, 97.5])
    assert (low, high) == tuple(ref)


A = [0.12, 0.57, 0.33, 0.91, 0.05, 0.78, 0.46]  # continuous values: every percentile and resample count shows
B = [0.40, 0.10, 0.95, 0.22, 0.61, 0.37, 0.83]


def reference_interval(values: list[float], resamples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = np.asarray(values)[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def test_the_defaults_are_2000_and_10000_resamples_from_seed_0() -> None:
    assert bootstrap(A) == (float(np.mean(A)), *reference_interval(A, 2000, 0))
    d = list(np.subtract(A, B))
    assert bootstrap_difference(A, B) == (float(np.mean(d)), *reference_interval(d, 10000, 0))
    assert bootstrap_difference(A, B, resamples=300, seed=3) == bootstrap(d, resamples=300, seed=3)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, 7, size=(10000, 7)), rng.integers(0, 7, size=(10000, 7))
    low, high = np.percentile(np.asarray(A)[i].mean(axis=1) - np.asarray(B)[j].mean(axis=1), [2.5, 97.5])
    assert bootstrap_difference(A, B, paired=False)[1:] == (float(low), float(high))


def test_paired_resamples_the_differences() -> None:
    a, b = [1.0, 4.0, 2.0, 7.0], [0.0, 1.0, 2.0, 3.0]
    assert bootstrap_difference(a, b, resamples=200, seed=2) == bootstrap([1.0, 3.0, 0.0, 4.0], resamples=200, seed=2)
    with pytest.raises(ValueError, match=r"paired samples differ in size: 3 and 12"):
        bootstrap_difference(ZEROS3, COINS12)
