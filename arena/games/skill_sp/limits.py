"""What a sandbox run is given and what it returns: its :class:`Limits` and a :class:`SandboxResult`
with its :class:`Status` (the sandbox itself, and its threat model, are in sandbox.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot start a sandbox on this machine (a setup error, not a model error)."""


class Limits(BaseModel):
    """Resource limits of one sandbox run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(default=5.0, gt=0, le=600, description="Wall-clock limit in seconds (parent kills the run).")
    cpu_s: int = Field(default=2, ge=1, le=600, description="CPU-time limit in seconds (RLIMIT_CPU).")
    memory_mb: int = Field(default=256, ge=64, le=65536, description="Address-space limit in MiB (RLIMIT_AS).")
    output_bytes: int = Field(default=65536, ge=1024, description="Cap on stdout+stderr bytes; past it the run is killed.")
    file_bytes: int = Field(default=1 << 20, ge=0, description="Largest file the run may write (RLIMIT_FSIZE).")
    tmp_bytes: int = Field(default=8 << 20, ge=1 << 16, description="Size of the tmpfs working directory /tmp.")
    open_files: int = Field(default=64, ge=16, le=4096, description="Open file descriptors (RLIMIT_NOFILE).")
    processes: int = Field(
        default=64, ge=1, le=4096,
        description="Processes and threads of the run's uid in its user namespace (RLIMIT_NPROC; a root caller "
        "is exempt from it, and the seccomp filter forbids new processes anyway).",
    )  # fmt: skip
    tmp_files: int = Field(
        default=4096, ge=16, le=1 << 20,
        description="Files, folders and links in /tmp; the parent polls and kills the run past it "
        "(their inodes are kernel memory that neither the tmpfs size nor RLIMIT_AS counts).",
    )  # fmt: skip


class Status(enum.StrEnum):
    """How a run ended."""

    OK = "ok"  # the driver reported success (and, for call, a JSON value)
    ERROR = "error"  # the code raised, exited or died without the driver's report, or forged one
    TIMEOUT = "timeout"  # wall-clock (parent's clock) or CPU limit (parent's wait4)
    KILLED = "killed"  # memory or output limit


@dataclass(frozen=True)
class SandboxResult:
    """The typed outcome of one run; ``value`` is set only by a successful :meth:`Sandbox.call`."""

    status: Status
    output: str = ""
    stderr: str = ""
    value: Any = None
    limit: Literal["wall", "cpu", "memory", "output", "file", "processes"] | None = None
    reason: str = ""
    returncode: int | None = None
    wall_s: float = 0.0  # measured by the parent
    cpu_s: float = 0.0  # user + system time of the run's processes, from the parent's wait4
    run_id: str = ""  # in the interpreter's argv: a label for logs and tests (the code can erase it; no kill relies on it)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK
