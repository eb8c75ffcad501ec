"""The policy table of a config: policy kinds, their sampling, seat shorthands.

``policies:`` maps a name to one of :data:`POLICY_KINDS` (``kind: model`` is the
default); ``seats:`` may also name ``human`` or ``scripted:<bot>`` without a table
entry (:func:`shorthand_policy`). The policies' own config model: the assembly
(arena/loop/config.py) composes it, and builds policies from it (arena/loop/build.py).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.policies.base import SamplingParams


class SamplingSection(BaseModel):
    """How a policy samples; every field can be overridden per phase."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(default=256, ge=1, description="Token budget of each turn.")
    stop: list[str] = Field(default_factory=list, description="Strings that end a completion (cut from its text).")

    def params(self, override: SamplingOverride | None = None) -> SamplingParams:
        fields = self.model_dump() | (override.model_dump(exclude_none=True) if override else {})
        return SamplingParams(**{**fields, "stop": tuple(fields["stop"])})


class SamplingOverride(BaseModel):
    """Per-phase changes to a policy's sampling; unset fields keep the policy's."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0.0, description="Sampling temperature; 0 is greedy.")
    top_p: float | None = Field(default=None, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int | None = Field(default=None, ge=1, description="Token budget of each turn.")
    stop: list[str] | None = Field(default=None, description="Strings that end a completion.")


class ModelPolicySpec(BaseModel):
    """A generative model: the trainable policy, a frozen copy, a checkpoint or a server."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["model"] = "model"
    model: str = Field(
        default="smollm2-135m",
        description="Built-in name, local folder, checkpoint or run folder (its newest checkpoint), or hub id; "
        "openai: the server's model name.",
    )
    trainable: bool = Field(default=False, description="A learner trains these weights. Several policies may be "
                            "trainable: each gets its own learner, samples (its own seats' turns), checkpoint and sync.")
    learner: dict[str, Any] = Field(
        default_factory=dict, description="A trainable policy's changes to the run's learner section (top-level keys "
        "replace the run's, e.g. {lr: 2e-6, estimators: {...}}); empty: the run's learner as it is.",
    )
    frozen: bool = Field(default=False, description="Explicitly never trained (the default for non-trainable policies).")
    backend: Literal["hf", "vllm", "openai"] = Field(
        default="hf", description="hf: transformers; vllm: in-process vLLM engine; openai: an OpenAI-compatible server."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="Generation dtype; auto: bfloat16 where it is fast (CUDA, CPUs with AVX512-BF16/AMX), else "
        "float32 (arena/policies/hardware.py has the measurement).",
    )
    device: str = Field(default="cpu", description="torch device for hf generation.")
    sampling: SamplingSection = Field(default_factory=SamplingSection, description="Sampling settings.")
    phase_sampling: dict[str, SamplingOverride] = Field(
        default_factory=dict, description="Phase name -> sampling changes for that phase's turns."
    )
    max_model_len: int | None = Field(
        default=None, ge=128, description="Longest prompt + completion (vllm default 2048; hf: the model's limit)."
    )
    overflow: Literal["truncate", "end"] = Field(
        default="truncate",
        description="A prompt over max_model_len: truncate its oldest tokens, or end the episode as a truncation.",
    )
    max_batch_size: int = Field(default=64, ge=1, description="hf: most sequences in one forward pass.")
    max_batch_tokens: int = Field(
        default=32768, ge=256, description="hf: most padded tokens (prompt + budget) in one generation batch."
    )
    prefix_sharing: bool = Field(
        default=True, description="hf: prefill a prompt repeated in one batch (G solvers, attempts) once and copy "
        "its KV cache to its rows; false prefills every row (same completions either way)."
    )
    gpu_memory_utilization: float = Field(
        default=0.5, gt=0.0, le=1.0, description="vllm: share of GPU memory for weights and KV cache."
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="vllm: GPUs the engine shards over.")
    enable_sleep_mode: bool = Field(default=False, description="vllm (GPU): free engine memory during updates.")
    kv_cache_gb: float | Literal["auto"] = Field(
        default="auto", description="vllm on CPU: the KV cache in GiB, allocated whole at start-up; auto: what the "
        "engine can use, max_num_seqs sequences of max_model_len tokens (the built-in model in float32: 8 x 2048 "
        "tokens x 45 KiB = 720 MiB); a number keeps that budget (2.0 before issue #54).",
    )
    max_num_seqs: int | None = Field(
        default=None, ge=1, le=4096, strict=True, description="vllm: most sequences the engine runs at once (more "
        "wait their turn); null: 8 on CPU with kv_cache_gb auto, else vLLM's own (256 on CPU).",
    )
    seeded_sampling: bool = Field(
        default=True,
        description="vllm: seed every request (reproducible episodes, exact resume; ~10% slower on CPU, measured).",
    )
    base_url: str | None = Field(default=None, description="openai: server URL, e.g. http://127.0.0.1:8000.")
    api: Literal["completions", "chat"] = Field(default="completions", description="openai: endpoint to use.")
    api_key_env: str | None = Field(default=None, description="openai: environment variable holding the API key.")
    timeout_s: float = Field(default=120.0, gt=0.0, description="openai: per-request timeout.")
    retries: int = Field(default=2, ge=0, le=10, description="openai: retries on connection errors and 5xx.")
    backoff_s: float = Field(
        default=0.5, ge=0.0, le=60.0,
        description="openai: wait before retry k (k = 1, 2, ...) is backoff_s * 2**(k-1) seconds.",
    )

    sync_weights: bool = Field(
        default=False, description="openai: the server receives the learner's weights after every update (a server "
        "started by python -m arena.serve); needed for a trainable openai policy.",
    )
    weights_dir: str | None = Field(
        default=None, description="openai with sync_weights: a folder the trainer writes each update's weights to and "
        "the server reads (a shared file system across machines); default: a fresh folder in /dev/shm (same machine).",
    )

    weights_transport: Literal["file", "nccl"] = Field(
        default="file", description="openai with sync_weights: file (safetensors in weights_dir, announced over HTTP; "
        "tested on CPU) or nccl (vLLM's NCCL weight transfer to a server started with --weight-transfer nccl; GPU "
        "only, written but not yet run: arena/policies/nccl_push.py).",
    )
    nccl_address: str | None = Field(
        default=None, description="weights_transport nccl: host:port where the trainer opens the NCCL group (the "
        "server's workers connect to it).",
    )

    @field_validator("kv_cache_gb", mode="before")
    @classmethod
    def _kv_size(cls, value: Any) -> Any:
        if value == "auto":
            return value
        try:
            gb = float(value)
        except (TypeError, ValueError):
            gb = math.nan
        if isinstance(value, bool) or not 0 < gb <= 4096:  # NaN fails both
            raise ValueError("not a size: give GiB, 0 < x <= 4096 (e.g. 2.0), or auto")
        return gb

    @model_validator(mode="after")
    def _backend_settings(self) -> ModelPolicySpec:
        if self.trainable and self.frozen:
            raise ValueError("trainable and frozen: a policy is one or the other")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs base_url (e.g. http://127.0.0.1:8000)")
        if self.sync_weights and (self.backend != "openai" or self.api != "completions"):
            raise ValueError("sync_weights applies to backend 'openai' with api 'completions' (a server started by "
                             "python -m arena.serve); hf and vllm policies are synced in-process")
        if self.weights_transport == "nccl" and not self.nccl_address:
            raise ValueError("weights_transport nccl needs nccl_address (host:port the server can reach)")
        if self.backend == "openai" and self.trainable and not self.sync_weights:
            raise ValueError("a trainable 'openai' policy needs sync_weights: true and a server started by "
                             "python -m arena.serve (or use backend hf or vllm)")
        if self.enable_sleep_mode and self.backend != "vllm":
            raise ValueError("enable_sleep_mode only applies to backend 'vllm'")
        if self.dtype == "auto":  # a bad ARENA_AUTO_DTYPE is a start-up error, not a failure at model load
            from arena.policies.hardware import forced_auto_dtype

            forced_auto_dtype()
        return self

    def params_for(self, phase: str) -> SamplingParams:
        return self.sampling.params(self.phase_sampling.get(phase))

    @property
    def resolved_dtype(self) -> str:
        from arena.policies.hardware import resolve_dtype

        return resolve_dtype(self.dtype, self.device)


class RewardModelSpec(BaseModel):
    """A sequence-classification reward model: its score is the seat's completion text."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["reward_model"]
    model: str = Field(description="Local folder, checkpoint or hub id of a sequence-classification model.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(default="float32", description="Scoring dtype.")
    device: str = Field(default="cpu", description="torch device.")
    max_batch_size: int = Field(default=16, ge=1, description="Most conversations scored in one forward pass.")
    max_length: int = Field(default=4096, ge=16, description="Longest conversation in tokens (older tokens cut).")
    label_index: int = Field(default=0, ge=0, description="Which logit is the reward, for multi-label heads.")


class ScriptedSpec(BaseModel):
    """A scripted bot of the game (``name`` or ``name:arg``) or a generic one ('random')."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["scripted"]
    bot: str = Field(default="default", description="Bot name, e.g. 'copycat' or 'fixed_vote:2'.")


class HumanSpec(BaseModel):
    """A person at the terminal."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["human"]


PolicySpec = ModelPolicySpec | RewardModelSpec | ScriptedSpec | HumanSpec
POLICY_KINDS: dict[str, type[BaseModel]] = {
    "model": ModelPolicySpec, "reward_model": RewardModelSpec, "scripted": ScriptedSpec, "human": HumanSpec,
}


def shorthand_policy(name: str) -> PolicySpec | None:
    """``human`` and ``scripted:<bot>`` may be named in ``seats`` without a table entry."""
    if name == "human":
        return HumanSpec(kind="human")
    if name.startswith("scripted:"):
        return ScriptedSpec(kind="scripted", bot=name.split(":", 1)[1] or "default")
    return None
