"""Atomic training checkpoints: write to a temporary folder, then rename.

A checkpoint folder ``checkpoints/step_000012`` holds the model
(``save_pretrained``), the optimizer, the training state (step, estimator
states such as RAE's baselines, the schedule) as JSON, the RNG states, and the
game's cross-episode state as readable files in ``game_state/``. Because the folder only gets its final
name once everything is on disk, a run killed at any moment leaves either the
previous checkpoints or a complete new one, never a half-written one; stray
temporary folders are removed at the next save. Files and folders are fsynced
before the rename and the ``checkpoints/`` folder after it. Folders that go
(pruned by ``keep``, or replaced by a new save of the same step) are renamed to a
temporary name before they are deleted, so no reader ever finds one half-deleted.
A failed write (a full disk) removes its temporary folder and stops the run with
one line (:class:`CheckpointWriteError`); the earlier checkpoints stay as they were.
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

from arena.core.errors import RunStopped

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
    writers (a game's cross-episode state writes its readable files this way).

    A write that fails (a full disk, a file-size limit) removes its temporary folder and
    raises :class:`CheckpointWriteError`, one line; the checkpoints already there are untouched.
    """
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    for stray in root.glob(f"{TMP_PREFIX}*"):
        shutil.rmtree(stray, ignore_errors=True)
    final = root / f"step_{step:06d}"
    tmp = root / f"{TMP_PREFIX}step_{step:06d}"
    try:
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
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _is_write_error(e):
            raise
        raise CheckpointWriteError(_write_error_line(root, final, e)) from e
    if final.exists():  # the same step again (a resume from an older checkpoint): swap, never delete in place
        _discard(final, root)
    os.rename(tmp, final)
    _fsync_dir(root)
    for old in list_checkpoints(run_dir)[:-keep]:
        _discard(old, root)
    return final


class CheckpointWriteError(RunStopped):
    """Writing a checkpoint failed on the file system (disk full, file-size limit, quota)."""


# Failures of the file system as the writers report them: OSError (json, pathlib), torch.save's
# RuntimeError ("file write failed"; on a full disk that is not a tmpfs, "basic_ios::clear: iostream
# error" and then, while closing the zip, "[enforce fail at inline_container.cc] . unexpected pos N vs M",
# both seen when CI's disk filled at stop 21), safetensors' SafetensorError ("IoError(... StorageFull ...)").
_WRITE_FAILURES = ("No space left", "StorageFull", "file write failed", "File too large", "FileTooLarge",
                   "Disk quota", "QuotaExceeded", "IoError", "iostream error", "unexpected pos")


def _is_write_error(err: BaseException | None) -> bool:
    """``err``, or an exception it was raised from or while handling, is a file-system write failure."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError) or any(s in str(err) for s in _WRITE_FAILURES):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _write_error_line(root: Path, final: Path, err: BaseException) -> str:
    try:
        free = f"{shutil.disk_usage(root).free / 2**20:.1f} MB free there"
    except OSError:
        free = "free space unknown"
    cause = " ".join(str(err).split())[:200] or type(err).__name__
    done = list_checkpoints(root.parent)
    kept = f"the newest complete checkpoint, {done[-1].name}, is intact" if done else "no earlier checkpoint exists"
    return (f"checkpoint: writing {final} failed ({cause}; {free}); the partial copy was removed and {kept}; "
            "free disk space, then continue with --resume")


def _discard(folder: Path, root: Path) -> None:
    """Remove a checkpoint folder so that it is never seen half-deleted: rename it to a temporary
    name first (one atomic step), then delete; a kill in between leaves a stray that the next save removes."""
    doomed = root / f"{TMP_PREFIX}old-{folder.name}"
    shutil.rmtree(doomed, ignore_errors=True)
    os.rename(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    """Flush every file, then every folder's entries, so the rename publishes data that is on disk."""
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    for path in [*(p for p in folder.rglob("*") if p.is_dir()), folder]:
        _fsync_dir(path)


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


def gather_ranks(dist: Any, learner: Any) -> tuple[dict[str, Any], dict[str, Callable[[Path], None]]] | None:
    """Rank 0's optimizer state for a checkpoint and the writer of the other ranks' own (their RNG
    states, and each rank's partition of a ZeRO optimizer) into ``ranks/rank_R.pt``; ``None`` on the
    other ranks, which hand theirs to rank 0 and wait for the save."""
    from arena.core.distributed import barrier, gather_to_main

    optimizer = learner.state_dict()
    if not dist.active:
        return optimizer, {}
    parts = gather_to_main(dist, {"rng": rng_state(), **(optimizer if learner.partitioned else {})})
    if not dist.main:
        barrier(dist)
        return None
    ranks = parts or []
    if learner.partitioned:
        optimizer = {"optimizer": [r.pop("optimizer") for r in ranks]}
    return optimizer, {"ranks": lambda folder: [torch.save(r, folder / f"rank_{i}.pt") for i, r in enumerate(ranks) if i]}
