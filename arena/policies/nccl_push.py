"""NCCL weight push to a vLLM server (GPU machines): vLLM's own trainer-side transfer engine.

Used by :class:`arena.policies.openai.OpenAIPolicy` when ``weights_transport: nccl``; the server is
started with ``python -m arena.serve MODEL --weight-transfer nccl`` (vLLM's
``--weight-transfer-config '{"backend": "nccl"}'``). The trainer opens the NCCL group as rank 0
at ``nccl_address`` (host:port, reachable from the server), the server's workers join it as
ranks 1..N (``POST /init_weight_transfer_engine``), and every update is broadcast tensor by
tensor (vLLM's ``NCCLTrainerWeightTransferEngine.send_weights``, which drives
``/start_weight_update``, ``/update_weights`` and ``/finish_weight_update`` itself).

WRITTEN, NOT RUN: these machines have no GPU and no NCCL. The CPU path (safetensors on a shared
file system, announced over HTTP) is the tested one; ``scripts/gpu_check.sh`` runs this one when
a GPU machine is lent. A server restarted mid-run cannot be re-joined to the group: the run
stops with the client's one-line error and resumes from its last checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


class NamedTensors:
    """vLLM's ``WeightSource`` protocol over (name, tensor) pairs, in a fixed order, re-iterable."""

    def __init__(self, named: Iterable[tuple[str, Any]]):
        self.items = [(n, t.detach()) for n, t in named]

    def metadata(self) -> list[Any]:
        from vllm.distributed.weight_transfer.base import ParamMeta

        return [ParamMeta(n, t.dtype, tuple(t.shape)) for n, t in self.items]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.items)

    def held_names(self) -> None:
        return None


class NCCLPush:
    """Opens the group once (first push), then broadcasts each update's weights."""

    def __init__(self, base_url: str, address: str, server_ranks: int = 1):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"nccl_address {address!r}: expected host:port")
        self.base_url, self.host, self.port, self.server_ranks = base_url, host, int(port), server_ranks
        self.engine: Any = None

    def push(self, named: Iterable[tuple[str, Any]], version: int) -> None:
        from vllm.distributed.weight_transfer.base import WeightSource
        from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo, NCCLTrainerWeightTransferEngine

        source = NamedTensors(named)
        WeightSource.register(NamedTensors)  # an ABC: the protocol is structural here
        if self.engine is None:
            info = NCCLTrainerInitInfo(master_address=self.host, master_port=self.port,
                                       world_size=1 + self.server_ranks, rank=0)
            self.engine = NCCLTrainerWeightTransferEngine.trainer_init(
                info, client=HTTPVLLMWeightSyncClient(self.base_url), source=source)  # type: ignore[arg-type]
        self.engine.source = source
        self.engine.send_weights()
        self.engine.client.finish_weight_update(str(version))  # vLLM's own weight_version: GET /weight_info
