"""Every script in examples/ runs, on a tiny budget, so none of them rots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "__init__.py"), ids=lambda p: p.name)
def test_example_runs(script: Path) -> None:
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip()


def test_lowest_unique_rules() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    from lowest_unique import winner

    assert winner({"a": 1, "b": 1, "c": 2}) == "c"
    assert winner({"a": 3, "b": 3}) is None
    assert winner({"a": 5, "b": 2, "c": 9}) == "b"
