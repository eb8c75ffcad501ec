"""The suite's one rule for comparing floats (issue #54).

Float32 results differ between CPU kernels: AVX2, AVX512-BF16 and AVX512-BF16 with AMX block their
matmuls differently, sum in other orders and fuse other multiply-adds, and a batched forward is not
the same sum as a single one. Three host kinds have broken the suite in turn, each time by one
rounding step outside a tolerance tuned to the machine at hand. So no test sets a tolerance by hand
(tests/test_tolerance_rule.py holds that); each comparison says which of these it is:

1. **Exact maths, in float64** (Python floats, NumPy, ``torch.float64``, tabular game values):
   :func:`approx64` / :func:`close64`, relative ``2**-30`` (about 1e-9) and absolute ``2**-40``
   (about 1e-12) of the values' scale. A float64 result of a few thousand operations is that close
   to its exact value on any kernel. A test of a formula that goes through a model runs the model in
   float64 (``model.double()``) and compares here: the formula, not the rounding, is under test.
2. **A float32 result** (a model's logits, log-probabilities, gradients in float32):
   :func:`approx32` / :func:`close32`, ``ULPS32`` = 256 float32 ulps (``256 * 2**-23``, about 3e-5)
   of ``scale``, both relative and absolute. ``scale`` is the magnitude of the largest *term* that
   entered the result, not of the result: a log-probability near 0 is a logit of 40 minus a
   log-sum-exp of 40, and is only as exact as 40 is (``LOGITS`` is that scale for the suite's models).
   It defaults to the largest magnitude among the compared values; a test whose values cancel passes
   the terms' scale. 256 ulps leaves room for
   reduction orders over a few hundred terms and a few layers, and is still 1,000 times tighter than
   what any of the suite's planted bugs moves.
3. **Not rounding at all**: sampled frequencies, Monte Carlo estimates, figures printed to a few
   decimals, an iterative solver stopped early. :func:`within` takes the tolerance with the reason
   for it (``within(p, 0.08, "400 draws: 4 standard errors")``).

Checks that two results *differ* (an adapter moved the logits) use :func:`apart`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

EPS32 = 2.0 ** -23  # float32's machine epsilon
ULPS32 = 256 * EPS32  # the float32 rule: 256 ulps of the scale (about 3.05e-5)
# The scale of a model's log-probabilities (and of probabilities taken from them): a log-probability is a
# logit minus a log-sum-exp of logits. The suite's largest, measured: the peaked tiny model (its final norm
# times 40) 31.6, SmolLM2-135M 25.2 (a Kuhn prompt, float32).
LOGITS = 64.0
REL64 = 2.0 ** -30  # the float64 rule (about 9.3e-10 relative ...
ABS64 = 2.0 ** -40  # ... and 9.1e-13 absolute, of a scale of 1)


def _magnitude(values: Any) -> float:
    """The largest finite magnitude among ``values`` (tensors, arrays, numbers, nested lists); 0 if none."""
    try:
        import torch

        if isinstance(values, torch.Tensor):
            values = values.detach().double().cpu().numpy()
    except ImportError:  # pragma: no cover - torch is a dependency of the suite
        pass
    if isinstance(values, dict):
        values = list(values.values())
    arr = np.asarray(values, dtype=float) if not isinstance(values, np.ndarray) else values.astype(float)
    finite = np.abs(arr[np.isfinite(arr)])
    return float(finite.max()) if finite.size else 0.0


def scale_of(*values: Any) -> float:
    """The largest magnitude among several compared values (the default ``scale``); 1 when they are all 0
    (a comparison with an exact 0 passes the scale of the terms that cancelled, where it is known)."""
    top = max(_magnitude(v) for v in values)
    return top if top > 0 else 1.0


def approx64(expected: Any, scale: float = 1.0) -> Any:
    """``pytest.approx`` for exact maths in float64 (rule 1)."""
    return pytest.approx(expected, rel=REL64, abs=ABS64 * scale)


def close64(actual: Any, expected: Any, scale: float = 1.0, msg: Any = None) -> None:
    """``torch.testing.assert_close`` for exact maths in float64 (rule 1)."""
    import torch

    torch.testing.assert_close(actual, expected, rtol=REL64, atol=ABS64 * scale, msg=msg)


def approx32(expected: Any, scale: float | None = None) -> Any:
    """``pytest.approx`` for a float32 result (rule 2): 256 ulps of ``scale`` (default: the values' own)."""
    s = scale_of(expected) if scale is None else scale
    return pytest.approx(expected, rel=ULPS32, abs=ULPS32 * s)


def close32(actual: Any, expected: Any, scale: float | None = None, msg: Any = None) -> None:
    """``torch.testing.assert_close`` for a float32 result (rule 2). ``scale``: the magnitude of the terms
    the result was summed from, when they are larger than the result (default: the compared values')."""
    import torch

    s = scale_of(actual, expected) if scale is None else scale
    torch.testing.assert_close(actual, expected, rtol=ULPS32, atol=ULPS32 * s, msg=msg)


def within(expected: Any, tolerance: float, why: str) -> Any:
    """``pytest.approx(expected, abs=tolerance)`` for a difference that is not rounding (rule 3); ``why``
    says where the tolerance comes from and must not be empty."""
    if not why.strip():
        raise ValueError("within(): say why the tolerance is what it is")
    return pytest.approx(expected, abs=tolerance)


def apart(a: Any, b: Any, at_least: float) -> bool:
    """Whether ``a`` and ``b`` differ somewhere by more than ``at_least`` (for "it moved" checks)."""
    diff = np.abs(np.asarray(_as_array(a), dtype=float) - np.asarray(_as_array(b), dtype=float))
    return bool(diff.size) and float(diff.max()) > at_least


def _as_array(values: Any) -> Any:
    try:
        import torch

        if isinstance(values, torch.Tensor):
            return values.detach().double().cpu().numpy()
    except ImportError:  # pragma: no cover
        pass
    return values

