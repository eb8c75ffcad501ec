"""Which dtype is fast here: bfloat16 only where the hardware multiplies it natively.

Measured on this project's machines: on a CPU with AVX512-BF16 (or AMX), bf16
matmuls run 3-6x faster than float32; on an AVX2-only CPU, torch has no bf16
GEMM kernel and falls back to a reference loop (``cpublas_gemm_impl``) that was
over 100x slower: a 2-step SpyRL run that takes about a minute in float32 was
still in its second backward pass after 40 minutes under bf16 autocast. So
``dtype: auto`` (the default) and ``autocast_bf16: auto`` pick bf16 on CUDA and on
CPUs that advertise bf16 instructions, float32 elsewhere.
"""

from __future__ import annotations

import functools
from pathlib import Path

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def cpu_has_bf16() -> bool:
    """Whether /proc/cpuinfo lists a native bf16 instruction set (False where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    return any(f in flags for f in BF16_CPU_FLAGS)


def fast_bf16(device: str = "cpu") -> bool:
    """bf16 is fast on ``device``: any CUDA device, or a CPU with bf16 instructions."""
    return device.startswith("cuda") or (device == "cpu" and cpu_has_bf16())


def resolve_dtype(name: str, device: str = "cpu") -> str:
    """``auto`` -> 'bfloat16' where bf16 is fast, else 'float32'; other names pass through."""
    if name != "auto":
        return name
    return "bfloat16" if fast_bf16(device) else "float32"
