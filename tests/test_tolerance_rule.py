"""Every float comparison in the suite follows tests/tolerance.py's rule (issue #54): no hand-set
tolerance, no ``allclose``/``isclose`` with its own defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tolerance import ULPS32, approx32, approx64, close32, within

TESTS = Path(__file__).parent
# a number given as a tolerance: atol=1e-6, rel = 0.05, abs=2e-6 ...
HAND_SET = re.compile(r"\b(atol|rtol|abs|rel|abs_tol|rel_tol)\s*=\s*[-+(]*\s*\d")
# comparisons whose defaults are tuned to nothing (torch.allclose's atol is 1e-8 whatever the dtype)
RAW = re.compile(r"\b(torch|np|numpy|math)\.(allclose|isclose)\(|np\.testing\.assert_allclose\(")


def offenders(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)
            if HAND_SET.search(line) or RAW.search(line)]


def test_no_test_sets_its_own_tolerance() -> None:
    found = [f"{path.relative_to(TESTS)}:{n}: {line}"
             for path in sorted(TESTS.rglob("*.py")) if path.name not in {"tolerance.py", Path(__file__).name}
             for n, line in offenders(path.read_text(encoding="utf-8"))]
    assert not found, "use tests/tolerance.py's approx64/close64, approx32/close32 or within(..., why):\n" + "\n".join(found)


def test_the_scan_sees_each_spelling() -> None:
    for line in ("torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)", "x == pytest.approx(y, abs=1e-6)",
                 "pytest.approx(y, rel = 5e-6)", "torch.allclose(a, b)", "np.testing.assert_allclose(a, b)",
                 "math.isclose(a, b)"):
        assert offenders(line), line
    assert not offenders("close32(a, b, scale=40.0)") and not offenders("within(p, 0.08, 'sampled')")


def test_the_float32_rule_scales_with_the_terms() -> None:
    """One rounding step of a logit of 40 passes; a planted bug's 1e-2 does not; the scale is the terms'."""
    step = 40.0 * 2.0 ** -23  # one ulp at 40 (about 4.8e-6: the AMX host's failures were 1.9e-6 and 3e-7)
    assert -0.2 + step == approx32(-0.2, scale=40.0)
    assert -0.2 + 300 * step != approx32(-0.2)  # 300 ulps of 40 is not rounding at a scale of 1 ...
    assert -0.2 + 300 * step == approx32(-0.2, scale=40.0 * 300 / 256)  # ... nor a breach when the terms are that big
    assert -0.2 + 1e-2 != approx32(-0.2, scale=40.0)
    close32([1.0 + 100 * 2.0 ** -23], [1.0])
    with pytest.raises(AssertionError):
        close32([1.0 + 1e-3], [1.0])
    assert ULPS32 == pytest.approx(3.0517578125e-05)


def test_float64_and_stated_tolerances() -> None:
    assert 0.1 + 0.2 == approx64(0.3) and 0.1 + 0.2 != 0.3
    assert 1 / 3 + 1e-6 != approx64(1 / 3)
    assert 0.46 == within(0.4583, 0.01, "printed to 2 decimals")
    with pytest.raises(ValueError):
        within(0.5, 0.1, " ")
