"""LoRA: the learner trains low-rank adapters on frozen base weights (``learner.lora``, with ``peft``).

A LoRA layer replaces the output of a frozen linear map ``W x`` by

    y = W x + (alpha / r) * B (A dropout(x)),    A: (r, in), B: (out, r), B = 0 at the start,

so the model starts as the base model exactly and only ``A`` and ``B`` (a few tenths of a
percent of the weights at r = 8) get gradients and optimizer state. The merged weight that a
generator without LoRA support needs is ``W + (alpha / r) * B A`` (:func:`merged_state_dict`,
computed beside the learner's weights, never by merging in place and unmerging, which would
leave rounding error in ``W``).

peft is imported only when ``learner.lora`` is set. The adapter is the ``default`` adapter of a
``peft.PeftModel``; its ``save_pretrained`` writes ``adapter_config.json`` and
``adapter_model.safetensors``, the folder that checkpoints hold and that
:func:`arena.core.models.load_causal_lm` loads over its base model. Several trainable policies on one
base (``shared_base``) hold one ``PeftModel`` with an adapter named after each policy, each learner
seeing it through a :class:`~arena.learners.adapters.PolicyAdapter`; the helpers below take either.
"""

from __future__ import annotations

from typing import Any, Literal

from arena.core.errors import ConfigError
from pydantic import BaseModel, ConfigDict, Field, field_validator

#: What ``target_modules`` is when unset: the attention projections of Llama-style models
#: (SmolLM2, Llama, Qwen, Mistral), which vLLM also serves LoRA on.
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
ADAPTER = "default"
INIT_SEED = 0  # the adapters' initialisation (apply_lora)


class LoraConfig(BaseModel):
    """``learner.lora``: train LoRA adapters only; unset: every weight is trained."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(default=8, ge=1, le=512, description="Rank of each adapter (A is r x in, B is out x r).")
    alpha: float = Field(default=16.0, gt=0.0, description="Scale: the adapter adds (alpha / r) * B A to each weight.")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the adapter's input (0: none, "
                           "so the learner's and the generator's logprobs agree exactly).")
    target_modules: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TARGETS), min_length=1,
        description="Names (last component) of the linear layers that get adapters, e.g. q_proj, v_proj, "
        "gate_proj; or ['all-linear'] for every linear layer but the output head.",
    )

    shared_base: bool | Literal["auto"] = Field(
        default="auto", description="Several trainable policies with adapters over one base (same model, dtype and "
        "device, one backend): 'auto' or true holds ONE base with a named adapter per policy (hf: learners and "
        "generators share it, generator dtype = learner weights; vllm: one float32 base for the learners and one "
        "engine serving every adapter in one generate call per tick); true also makes a policy that cannot share a "
        "one-line error; false gives each policy its own model copy (docs/guides/several-policies.md).",
    )

    @field_validator("target_modules")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if not m or not m.replace("_", "").replace("-", "").replace(".", "").isalnum()]
        if bad:
            raise ValueError(f"not module names: {bad}; give names like q_proj, v_proj or all-linear")
        if "all-linear" in v and len(v) > 1:
            raise ValueError("all-linear stands alone; drop the other names or list modules by name")
        return v


def apply_lora(model: Any, cfg: LoraConfig, adapter: str = ADAPTER) -> Any:
    """``model`` wrapped in a ``peft.PeftModel`` whose only trainable weights are the adapter ``adapter``.

    The base model's modules are changed in place (adapter layers injected), so whoever else holds
    ``model`` runs with the adapters too. A target name that matches no layer is one line. ``A`` is drawn
    from the seed :data:`INIT_SEED` (the global RNG is left untouched), ``B`` is zero."""
    import peft

    bad = unknown_targets(list(cfg.target_modules), linear_names(model))
    if bad:  # peft refuses only when no name matches: one misspelt name among valid ones would train silently less
        raise ConfigError(f"learner.lora.target_modules: {', '.join(bad)} match(es) no linear layer of the model; its "
                          f"layers: {', '.join(sorted(linear_names(model)))} (or all-linear)")
    try:
        return seeded(lambda: peft.get_peft_model(model, peft_config(cfg), adapter_name=adapter))
    except ValueError as e:  # "Target modules {...} not found in the base model."
        raise ConfigError(f"learner.lora.target_modules={cfg.target_modules}: {' '.join(str(e).split())}") from None


def peft_config(cfg: LoraConfig) -> Any:
    """peft's ``LoraConfig`` for ``learner.lora``."""
    import peft

    targets: Any = "all-linear" if cfg.target_modules == ["all-linear"] else list(cfg.target_modules)
    return peft.LoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout, target_modules=targets,
                           bias="none", task_type="CAUSAL_LM")


def seeded(make: Any) -> Any:
    """``make()`` with the global RNG seeded from :data:`INIT_SEED`, and left as it was after.

    peft draws A (Kaiming-uniform) from the global RNG: from a fixed seed instead, an adapter's start is a
    function of the model and the config (every policy's adapter starts alike, shared base or not)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(INIT_SEED)
        return make()


def linear_names(model: Any) -> set[str]:
    """The last name component of every linear layer of ``model`` (what ``target_modules`` names)."""
    import torch

    return {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


def unknown_targets(targets: list[str], names: set[str]) -> list[str]:
    """The ``target_modules`` entries that match no linear layer (``all-linear`` always matches)."""
    return [t for t in targets if t != "all-linear" and t not in names]


def check_targets(model_name: str, cfg: LoraConfig, where: str) -> None:
    """Every ``target_modules`` name matches a linear layer of ``model_name``: read from its config with
    empty (meta) weights, so a misspelt name fails at start-up before any weight loads. A model whose
    config cannot be read here (a hub id not in the cache) is checked when it loads (:func:`apply_lora`)."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    from arena.core.models import resolve_model

    try:
        config = AutoConfig.from_pretrained(resolve_model(model_name))
        with init_empty_weights():
            skeleton = AutoModelForCausalLM.from_config(config)
    except (OSError, ValueError, KeyError):
        return
    names = linear_names(skeleton)
    bad = unknown_targets(list(cfg.target_modules), names)
    if bad:
        raise ConfigError(f"{where}: {', '.join(bad)} match(es) no linear layer of {model_name}; its layers: "
                          f"{', '.join(sorted(names))} (or all-linear)")


def is_lora(model: Any) -> bool:
    """``model`` is a peft model (a LoRA learner's module)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def base_model(model: Any) -> Any:
    """The transformers model under a peft model (adapter layers inside); ``model`` itself otherwise."""
    return model.get_base_model() if is_lora(model) else model


def adapter_of(model: Any) -> tuple[Any, str]:
    """The peft model that holds ``model``'s adapter, and the adapter's name: a
    :class:`~arena.learners.adapters.PolicyAdapter`'s shared model and policy name, else ``(model, "default")``."""
    return (model.peft, model.adapter) if hasattr(model, "adapter") and hasattr(model, "peft") else (model, ADAPTER)


def set_base_name(model: Any, name: str) -> None:
    """Record ``name`` (a built-in name, a folder, a hub id) as the base that a saved adapter loads over."""
    peft_model, adapter = adapter_of(model)
    peft_model.peft_config[adapter].base_model_name_or_path = name


def adapter_state_dict(model: Any) -> dict[str, Any]:
    """The adapter's weights alone (peft's names without the adapter's, as ``adapter_model.safetensors`` holds them)."""
    from peft import get_peft_model_state_dict

    peft_model, adapter = adapter_of(model)
    return get_peft_model_state_dict(peft_model, adapter_name=adapter)


def load_adapter_state(model: Any, state: dict[str, Any]) -> None:
    """Copy saved adapter weights into ``model``'s adapter; a missing or unexpected adapter key is an error
    (another policy's adapter on the same base is neither)."""
    from peft import set_peft_model_state_dict

    peft_model, adapter = adapter_of(model)
    result = set_peft_model_state_dict(peft_model, state, adapter_name=adapter)
    missing = [k for k in result.missing_keys if "lora_" in k and f".{adapter}." in k]
    if missing or result.unexpected_keys:
        raise ValueError(f"adapter does not fit the model: missing {missing[:3]}, unexpected {result.unexpected_keys[:3]}")


def merged_state_dict(model: Any) -> dict[str, Any]:
    """The base model's state dict with ``model``'s adapter merged: ``W + (alpha / r) * B A`` per LoRA layer,
    under transformers' own names (what a plain model's ``load_state_dict`` or vLLM's loader takes).

    The learner's weights are not touched: each merged weight is a new tensor."""
    import torch
    from peft.tuners.lora import LoraLayer

    base = base_model(model)
    adapter = adapter_of(model)[1]
    deltas = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer) and adapter in module.lora_A:
                deltas[f"{name}.weight"] = module.get_delta_weight(adapter)
        out = {}
        for key, value in base.state_dict().items():
            if "lora_" in key:
                continue
            plain = key.replace(".base_layer.", ".")
            out[plain] = value + deltas[plain].to(value.dtype) if plain in deltas else value
    return out
