"""Several training processes (ranks): who am I, the process group, and the few reductions a step needs.

Launch with the launcher's own conventions, or on one machine with ``--ranks`` (torchrun inside, its report of a
failed rank replaced by the rank's one line: ``arena.cli.launch_ranks``):

    python -m arena.train CONFIG --ranks 2
    torchrun --nproc_per_node 2 -m arena.train CONFIG
    deepspeed --num_gpus 2 --module arena.train CONFIG

Both set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
:func:`from_env` reads them. ``WORLD_SIZE`` unset or 1 is the one-process run, and then
nothing here calls ``torch.distributed`` (no process group, no barrier: the run is
byte-for-byte the one-process run). With several ranks :func:`init` starts the default
process group, gloo on CPU, NCCL where the learner runs on CUDA (rank ``r`` then uses
``cuda:LOCAL_RANK``).

How a step is split (arena/loop/trainer.py, arena/learners/update.py): the step's ``G`` game specs
are cut into ``W`` contiguous blocks of ``G / W`` (:meth:`Dist.block`), rank ``r`` plays
block ``r``; the finished episodes are gathered (:func:`gather`) so every rank computes the
advantages, estimator states, game metrics and cross-episode state of the whole step,
exactly as one rank would; each rank then trains only the samples of its own episodes,
with every loss normalisation (token counts, sequence counts, the longest completion,
objective totals) taken over the WHOLE step's samples, so the gradients of the ranks SUM
to the one-rank gradient: ``g = sum_r g_r`` (:func:`sum_grads`; DeepSpeed averages, so its
loss is scaled by ``W`` first). Sums of per-micro-batch statistics are reduced the same way
(:func:`sum_values`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class Dist:
    """This process's place among the ranks (``rank`` in ``[0, world)``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        """Several ranks: collectives are needed."""
        return self.world > 1

    @property
    def main(self) -> bool:
        """Rank 0 alone writes metrics, TensorBoard, plots, episodes and checkpoints."""
        return self.rank == 0

    def block(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share of ``items`` (``len(items)`` divisible by ``world``):
        ``items[r * n / W : (r + 1) * n / W]``; the blocks in rank order are ``items``."""
        if len(items) % self.world:
            raise ValueError(f"{len(items)} items do not split over {self.world} ranks")
        k = len(items) // self.world
        return list(items[self.rank * k : (self.rank + 1) * k])


SINGLE = Dist()


def from_env(env: Mapping[str, str] | None = None) -> Dist:
    """The rank as torchrun and the deepspeed launcher set it (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``)."""
    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return SINGLE
    rank = int(env.get("RANK", "0"))
    return Dist(rank=rank, world=world, local_rank=int(env.get("LOCAL_RANK", str(rank))))


def init(dist: Dist, device: str) -> None:
    """Start the default process group for ``dist`` (gloo on CPU, NCCL on CUDA); no-op for one rank."""
    if not dist.active or torch.distributed.is_initialized():
        return
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(dist.local_rank)
    torch.distributed.init_process_group(backend="nccl" if cuda else "gloo", rank=dist.rank, world_size=dist.world)


def finish(dist: Dist) -> None:
    """Wait for every rank, then close the process group (a clean exit; no-op for one rank)."""
    if dist.active and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def _device() -> torch.device:
    """Where collective tensors live: the current GPU under NCCL, else the CPU."""
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def barrier(dist: Dist) -> None:
    if dist.active:
        torch.distributed.barrier()


def gather(dist: Dist, obj: T) -> list[T]:
    """Every rank's ``obj`` (picklable), in rank order, on every rank; ``[obj]`` for one rank."""
    if not dist.active:
        return [obj]
    out: list[Any] = [None] * dist.world
    torch.distributed.all_gather_object(out, obj)
    return out


def gather_to_main(dist: Dist, obj: T) -> list[T] | None:
    """Every rank's ``obj`` in rank order on rank 0, None on the others (a collective: all ranks call it)."""
    if not dist.active:
        return [obj]
    out: list[Any] | None = [None] * dist.world if dist.main else None
    torch.distributed.gather_object(obj, out, dst=0)
    return out


def sum_values(dist: Dist, values: Mapping[str, float]) -> dict[str, float]:
    """``{k: sum over ranks of values[k]}`` (float64), in ``values``' key order; every rank
    must pass the same keys in the same order."""
    if not dist.active or not values:
        return dict(values)
    keys = list(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=_device())
    torch.distributed.all_reduce(t)
    return dict(zip(keys, t.cpu().tolist(), strict=True))


def max_value(dist: Dist, value: float) -> float:
    if not dist.active:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return float(t)


def sum_tensor(dist: Dist, t: torch.Tensor) -> torch.Tensor:
    """The element-wise sum of ``t`` over ranks (a new tensor, on ``t``'s device and dtype)."""
    if not dist.active:
        return t
    buf = t.detach().to(_device()).clone()
    torch.distributed.all_reduce(buf)
    return buf.to(t.device, t.dtype)


def sum_grads(dist: Dist, params: Iterable[torch.nn.Parameter]) -> None:
    """Replace each parameter's gradient by its sum over ranks, in one flat all-reduce.

    A parameter that got no gradient on any rank keeps ``grad = None`` (the optimizer skips
    it, as in a one-rank run); one that got a gradient on some ranks only gets their sum.
    """
    if not dist.active:
        return
    params = [p for p in params if p.requires_grad]
    sizes = [p.numel() for p in params]
    total = sum(sizes)
    flat = torch.zeros(total + len(params), dtype=torch.float32, device=_device())
    offset = 0
    for i, p in enumerate(params):
        if p.grad is not None:
            flat[offset : offset + sizes[i]] = p.grad.detach().reshape(-1).to(flat)
            flat[total + i] = 1.0  # this rank has a gradient for p
        offset += sizes[i]
    torch.distributed.all_reduce(flat)
    offset = 0
    for i, p in enumerate(params):
        if flat[total + i] > 0:
            grad = flat[offset : offset + sizes[i]].view_as(p).to(p.device, p.dtype)
            if p.grad is None:
                p.grad = grad.clone()
            else:
                p.grad.copy_(grad)
        offset += sizes[i]
