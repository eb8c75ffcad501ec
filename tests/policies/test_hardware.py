"""``dtype: auto`` (arena/policies/hardware.py): what it picks on which host, why, and the override."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arena.loop.config import load_config
from arena.loop.plan import precision_report
from arena.policies.hardware import (
    AUTO_DTYPE_ENV,
    BF16_MIN_SPEEDUP,
    auto_dtype,
    bf16_matmul_speedup,
    choose_cpu_dtype,
    cpu_bf16_flags,
    fast_bf16,
    resolve_dtype,
)

ROOT = Path(__file__).resolve().parents[2]


def test_auto_follows_this_cpus_bf16_instructions_and_speed_when_not_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AUTO_DTYPE_ENV, raising=False)
    flags = cpu_bf16_flags()
    dtype, why = auto_dtype("cpu")
    fast = bool(flags) and bf16_matmul_speedup() >= BF16_MIN_SPEEDUP  # measured once, here and in auto_dtype alike
    assert dtype == ("bfloat16" if fast else "float32") == resolve_dtype("auto", "cpu")
    assert fast_bf16("cpu") == fast
    assert all(f in why for f in flags) and "measured" in why if flags else "no native bf16 instructions" in why
    assert auto_dtype("cpu:1")[0] == dtype  # a numbered CPU device is the same CPU
    assert auto_dtype("cuda:0") == ("bfloat16", "a CUDA device")
    assert resolve_dtype("float16", "cpu") == "float16"  # a named dtype is never changed


def test_a_cpu_with_bf16_flags_picks_bf16_only_where_it_measured_faster() -> None:
    assert choose_cpu_dtype((), None)[0] == "float32"
    assert choose_cpu_dtype(("avx512_bf16",), 3.14) == ("bfloat16", "this CPU lists avx512_bf16; bf16 matmuls measured 3.1x float32's")
    assert choose_cpu_dtype(("avx512_bf16", "amx_bf16"), BF16_MIN_SPEEDUP)[0] == "bfloat16"
    dtype, why = choose_cpu_dtype(("avx512_bf16",), 1.19)
    assert dtype == "float32" and why == "this CPU lists avx512_bf16, but bf16 matmuls measured 1.19x float32's (bf16 needs 1.2x)"
    speedup = bf16_matmul_speedup()  # the real probe: a positive, finite ratio, measured once per process
    assert 0 < speedup < float("inf") and bf16_matmul_speedup() == speedup


def test_the_override_wins_on_every_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTO_DTYPE_ENV, "float16")
    assert auto_dtype("cpu") == auto_dtype("cuda:0") == ("float16", f"{AUTO_DTYPE_ENV}=float16")
    assert not fast_bf16("cuda:0")
    monkeypatch.setenv(AUTO_DTYPE_ENV, "bfloat16")
    assert fast_bf16("cpu") and resolve_dtype("auto") == "bfloat16"


def test_the_suite_runs_auto_as_float32_whatever_the_host() -> None:
    assert resolve_dtype("auto", "cpu") == "float32"  # tests/conftest.py
    line = precision_report(load_config(ROOT / "arena/games/spy/spy.yaml"))
    assert line == (f"precision: policies.learner float32 on cpu (auto: {AUTO_DTYPE_ENV}=float32); "
                    "learner float32 weights on cpu")


def test_a_bad_override_is_one_line_at_start_up() -> None:
    env = {"PATH": "/usr/bin:/bin", AUTO_DTYPE_ENV: "bf16"}
    proc = subprocess.run([sys.executable, "-m", "arena.train", "games/spy/spy.yaml"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == (
        f"error: games/spy/spy.yaml: policies.learner: {AUTO_DTYPE_ENV}='bf16' is not a dtype; "
        "use one of float32, bfloat16, float16 or unset it"
    )
