"""Which dtype is fast here: bfloat16 only where the hardware multiplies it natively.

Measured on this project's machines: on a CPU with AVX512-BF16 (or AMX), bf16
matmuls run 3-6x faster than float32; on an AVX2-only CPU, torch has no bf16
GEMM kernel and falls back to a reference loop (``cpublas_gemm_impl``) that was
over 100x slower: a 2-step SpyRL run that takes about a minute in float32 was
still in its second backward pass after 40 minutes under bf16 autocast. So
``dtype: auto`` (the default) and ``autocast_bf16: auto`` pick bf16 on CUDA and on
CPUs that advertise bf16 instructions, float32 elsewhere.

``ARENA_AUTO_DTYPE`` (``float32``, ``bfloat16`` or ``float16``) makes ``auto`` that dtype on
every device instead, whatever the hardware: the test suite sets ``float32`` so that a test
about something else does not change precision with the host (tests/conftest.py), and a user
can use it to make runs on different machines alike. :func:`auto_dtype` says what ``auto``
picks and why; ``arena.train`` prints it at start-up.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
AUTO_DTYPE_ENV = "ARENA_AUTO_DTYPE"
DTYPES = ("float32", "bfloat16", "float16")


@functools.cache
def cpu_bf16_flags() -> tuple[str, ...]:
    """The native bf16 instruction sets /proc/cpuinfo lists (none where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ()
    flags = {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    return tuple(f for f in BF16_CPU_FLAGS if f in flags)


def cpu_has_bf16() -> bool:
    """Whether /proc/cpuinfo lists a native bf16 instruction set (False where it cannot be read)."""
    return bool(cpu_bf16_flags())


def forced_auto_dtype() -> str | None:
    """``ARENA_AUTO_DTYPE`` when set; a value that is not a dtype is a ValueError naming it."""
    value = os.environ.get(AUTO_DTYPE_ENV, "").strip()
    if not value:
        return None
    if value not in DTYPES:
        raise ValueError(f"{AUTO_DTYPE_ENV}={value!r} is not a dtype; use one of {', '.join(DTYPES)} or unset it")
    return value


def auto_dtype(device: str = "cpu") -> tuple[str, str]:
    """What ``dtype: auto`` picks on ``device``, and the reason in words."""
    forced = forced_auto_dtype()
    if forced is not None:
        return forced, f"{AUTO_DTYPE_ENV}={forced}"
    if device.startswith("cuda"):
        return "bfloat16", "a CUDA device"
    flags = cpu_bf16_flags() if device.split(":")[0] == "cpu" else ()
    if flags:
        return "bfloat16", f"this CPU lists {' and '.join(flags)}"
    return "float32", f"{device}: no native bf16 instructions ({' or '.join(BF16_CPU_FLAGS)}), where bf16 matmuls are far slower"


def fast_bf16(device: str = "cpu") -> bool:
    """``auto`` means bf16 on ``device``: any CUDA device, or a CPU with bf16 instructions (or the override)."""
    return auto_dtype(device)[0] == "bfloat16"


def resolve_dtype(name: str, device: str = "cpu") -> str:
    """``auto`` -> :func:`auto_dtype`'s choice; other names pass through."""
    if name != "auto":
        return name
    return auto_dtype(device)[0]
