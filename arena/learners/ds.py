"""Build a DeepSpeed engine for the learner; imported only when ``learner.backend: deepspeed``.

On a machine without GPUs DeepSpeed's CPU accelerator is used with the gloo
backend; a single process initialises its own one-rank process group on a free
localhost port, without writing a rendezvous into ``os.environ``. Under the
``deepspeed`` or ``torchrun`` launchers the ranks come from the environment.
Only weights that require gradients are given to the optimizer (with ``learner.lora``, the
adapters). Gradient accumulation is left to the caller (``managed_gradient_accumulation:
false``): the learner runs its token-budget micro-batches, then steps once.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import torch

from arena.learners.config import LearnerConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def skip_shm_comm_build() -> None:
    """Keep DeepSpeed from JIT-compiling its CPU shared-memory all-reduce op.

    On the CPU accelerator DeepSpeed's comm backend compiles ``deepspeed_shm_comm``
    (C++, with ninja) the first time a process group starts on a machine, and again
    whenever the compile flags change (another venv's include paths). The op serves only
    ``inference_all_reduce`` (tensor-parallel inference); training reduces through
    torch.distributed (gloo) either way. Measured here: a one-step DeepSpeed test took
    55 s with the build and 5 s without. Marking the op incompatible is DeepSpeed's own
    switch for "not on this machine" (``build_shm_op`` then returns None); a machine
    without a C++ compiler no longer needs one for DeepSpeed on CPU.
    """
    import deepspeed.ops

    if not torch.cuda.is_available():
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def ensure_process_group() -> None:
    """One-rank process group on localhost unless a launcher already set one up."""
    import deepspeed

    skip_shm_comm_build()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if "WORLD_SIZE" in os.environ:  # a launcher's ranks: its environment says where to meet
        deepspeed.init_distributed(dist_backend=backend)
        return
    # One rank: an explicit rendezvous, so that no MASTER_PORT is left in os.environ for the processes
    # this one starts. A leaked port is still held by this process's store: a child that inherited it
    # failed with EADDRINUSE (a forked one-rank DeepSpeed run after an in-process one, in make test).
    os.environ.setdefault("LOCAL_RANK", "0")  # DeepSpeed's engine reads it
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False,
                               init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)


def deepspeed_config(cfg: LearnerConfig) -> dict[str, Any]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return {
        "train_micro_batch_size_per_gpu": 1,
        "train_batch_size": world,
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,
        "gradient_clipping": cfg.grad_clip,
        "zero_optimization": {"stage": cfg.deepspeed.zero_stage},
        "bf16": {"enabled": cfg.deepspeed.bf16},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def build_engine(model: Any, cfg: LearnerConfig) -> Any:
    import deepspeed

    ensure_process_group()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=deepspeed_config(cfg))
    return engine


def gathered_state_dict(engine: Any, merged: bool = False) -> dict[str, torch.Tensor]:
    """Full (unpartitioned) weights of the engine's module, for weight sync and checkpoints.

    ``merged``: a LoRA module's weights with the adapters merged in (arena/learners/lora.py), under
    the base model's own names."""
    from arena.learners.lora import merged_state_dict

    module = engine.module
    state = merged_state_dict if merged else (lambda m: m.state_dict())
    if getattr(engine, "zero_optimization_stage", lambda: 0)() == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
            return {k: v.detach().clone() for k, v in state(module).items()}
    return state(module)
