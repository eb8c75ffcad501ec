"""Atomic training checkpoints: write to a temporary folder, then rename.

A checkpoint folder ``checkpoints/step_000012`` holds the model
(``save_pretrained``), the optimizer, the training state (step, estimator
states such as RAE's baselines, the schedule) as JSON, the RNG states, and the
game's cross-episode state as readable files in ``game_state/``. Because the folder only gets its final
name once everything is on disk, a run killed at any moment leaves either the
previous checkpoints or a complete new one, never a half-written one; stray
temporary folders are removed at the next save.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

_STEP = re.compile(r"^step_(\d{6,})$")
TMP_PREFIX = ".tmp-"


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer_state: dict[str, Any],
    state: dict[str, Any],
    keep: int,
    extra: dict[str, Callable[[Path], None]] | None = None,
) -> Path:
    """Write ``checkpoints/step_NNNNNN`` atomically. ``extra`` maps subfolder names to
    writers (a game's cross-episode state writes its readable files this way)."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    for stray in root.glob(f"{TMP_PREFIX}*"):
        shutil.rmtree(stray, ignore_errors=True)
    final = root / f"step_{step:06d}"
    tmp = root / f"{TMP_PREFIX}step_{step:06d}"
    tmp.mkdir()
    model.save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "model")
    torch.save(optimizer_state, tmp / "optimizer.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({"step": step, **state}, indent=2))
    for name, write in (extra or {}).items():
        (tmp / name).mkdir()
        write(tmp / name)
    _fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())


def list_checkpoints(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _STEP.match(p.name)]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def find_checkpoint(path: Path) -> Path:
    """``path`` is a checkpoint folder or a run folder (its newest checkpoint that has its
    ``state.json``: a ``step_*`` folder without one is never chosen)."""
    if (path / "state.json").is_file():
        return path
    found = [p for p in list_checkpoints(path) if (p / "state.json").is_file()]
    if not found:
        raise FileNotFoundError(f"no checkpoint under {path}")
    return found[-1]


def load_state(checkpoint: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(training state, optimizer state, rng state) of a checkpoint folder."""
    state = json.loads((checkpoint / "state.json").read_text())
    optimizer = torch.load(checkpoint / "optimizer.pt", weights_only=False)
    rng = torch.load(checkpoint / "rng.pt", weights_only=False)
    return state, optimizer, rng
