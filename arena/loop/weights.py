"""Weights between a trainable policy's learner, its generator and a checkpoint.

:func:`push_weights` copies a learner's weights into the generator that plays with them (nothing when
they share one model); :func:`save_policies` / :func:`load_policies` write and read the checkpoint's
``policies/<name>/`` for every trainable policy but the first (whose weights are the checkpoint's
``model/``); :func:`restore_weights` loads a checkpoint's ``model/`` into a learner.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from arena.core.errors import ConfigError

if TYPE_CHECKING:
    from arena.loop.build import Trained


def push_weights(unit: Any, force: bool = False) -> None:
    """Push a trainable policy's learner weights into its generator (``unit``: a
    :class:`~arena.loop.build.Trained`, or anything with ``generator``, ``learner``, ``adapter_sync`` and
    ``pushed``). A no-op when they share the model, or when the generator already holds the learner's
    version (:attr:`Learner.version`, its optimizer steps): a step with no sample changes no weight and
    costs no push. ``force``: push anyway (weights loaded into the learner from a checkpoint).

    LoRA: a vLLM generator gets the adapter alone (saved to a fresh folder, served under a new
    name); an hf generator gets merged weights ``W + (alpha / r) * B A`` (arena/learners/lora.py), so it
    generates at a plain model's speed, with no adapter matmuls per token."""
    generator, learner = unit.generator, unit.learner
    if shares_model(generator, learner.module) or (unit.pushed == learner.version and not force):
        return
    unit.pushed = learner.version
    from arena.learners.lora import is_lora, merged_state_dict

    gen_model = getattr(generator, "model", None)
    learner_model = learner.module
    lora = is_lora(learner_model)
    if unit.adapter_sync is not None:
        generator.load_adapter(str(unit.adapter_sync.write(learner_model)))
        return
    if learner.engine is not None:
        from arena.learners.ds import gathered_state_dict

        state = gathered_state_dict(learner.engine, merged=lora)
    else:
        state = merged_state_dict(learner_model) if lora else learner_model.state_dict()
    if hasattr(generator, "load_weights"):  # vLLM: push into the running engine
        generator.load_weights(state.items())
        return
    with torch.no_grad():
        gen_model.load_state_dict(state)


def save_policies(units: Sequence[Trained], folder: Path) -> None:
    """The checkpoint's ``policies/<name>/``, for every trainable policy but the first: ``model/`` (weights or
    adapter, and tokenizer), ``optimizer.pt`` (with bf16 weights, the fp32 master too) and ``state.json``
    (the policy's estimator states)."""
    for unit in units:
        home = folder / unit.name
        unit.learner.module.save_pretrained(home / "model")
        unit.tokenizer.save_pretrained(home / "model")
        torch.save(unit.learner.state_dict(), home / "optimizer.pt")
        (home / "state.json").write_text(json.dumps({"estimators": unit.estimator_states.state_dict()}, indent=2))


def load_policies(units: Sequence[Trained], checkpoint: Path) -> None:
    """Each trainable policy but the first from the checkpoint's ``policies/<name>/`` (:func:`save_policies`)."""
    for unit in units:
        home = checkpoint / "policies" / unit.name
        if not (home / "state.json").is_file():
            raise ConfigError(f"--resume: the checkpoint {checkpoint.name} holds no trainable policy {unit.name!r} "
                              "(policies/<name>/); resume with the trainable policies the run started with")
        restore_weights(unit.learner.module, home / "model")
        unit.learner.load_state_dict(torch.load(home / "optimizer.pt", weights_only=False))
        unit.estimator_states.load_state_dict(json.loads((home / "state.json").read_text())["estimators"])


def shares_model(generator: Any, module: Any) -> bool:
    """The generator runs on the learner's own model (a LoRA learner's base, adapters injected): no sync."""
    from arena.learners.lora import base_model

    gen_model = getattr(generator, "model", None)
    return gen_model is not None and any(gen_model is m for m in (module, base_model(module)))


def restore_weights(module: Any, folder: Path) -> None:
    """Load a checkpoint's ``model/`` into the learner's module: the adapter (a LoRA run) or every
    weight; a LoRA checkpoint for a full learner, or the reverse, is a one-line error."""
    from arena.learners.lora import is_lora, load_adapter_state

    adapter = (folder / "adapter_model.safetensors").is_file()
    if adapter != is_lora(module):
        saved, now = ("a LoRA adapter", "trains every weight") if adapter else ("full weights", "trains LoRA adapters")
        raise ConfigError(f"--resume: the checkpoint {folder.parent.name} holds {saved} but this run {now}; "
                          "resume with the learner.lora setting the run started with")
    if adapter:
        from safetensors.torch import load_file

        load_adapter_state(module, load_file(str(folder / "adapter_model.safetensors")))
        return
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        module.load_state_dict(saved.state_dict())
