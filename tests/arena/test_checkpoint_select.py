"""Which checkpoint a resume (or a run-folder model) picks: never a step folder without its state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.core.models import newest_checkpoint_model, resolve_model
from arena.loop.checkpoint import find_checkpoint, list_checkpoints, load_state, save_checkpoint


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(2, 2)

    def save_pretrained(self, path: Path) -> None:
        path.mkdir(parents=True)
        (path / "config.json").write_text("{}")
        torch.save(self.state_dict(), path / "model.bin")


class NoTokenizer:
    def save_pretrained(self, path: Path) -> None:
        (path / "tokenizer.json").write_text("{}")


def save(run: Path, step: int, marker: float) -> Path:
    return save_checkpoint(run, step, TinyModel(), NoTokenizer(), {"lr": marker}, {"schedule": {"stage": step}}, keep=5)


def test_a_step_folder_without_its_state_is_never_chosen(tmp_path: Path) -> None:
    save(tmp_path, 2, 0.2)
    save(tmp_path, 10, 1.0)
    broken = tmp_path / "checkpoints" / "step_000010"
    (broken / "state.json").unlink()  # e.g. a copy that stopped half way
    (tmp_path / "checkpoints" / "step_000011").mkdir()  # an empty step folder
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000002", "step_000010", "step_000011"]
    chosen = find_checkpoint(tmp_path)
    assert chosen.name == "step_000002"
    state, optimizer, _ = load_state(chosen)
    assert state == {"step": 2, "schedule": {"stage": 2}} and optimizer == {"lr": 0.2}
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        find_checkpoint(broken)
    # the model side: the highest step whose model/ is complete (config + weights)
    (tmp_path / "checkpoints" / "step_000011" / "model").mkdir()
    (tmp_path / "checkpoints" / "step_000011" / "model" / "config.json").write_text("{}")
    assert newest_checkpoint_model(tmp_path) == broken / "model"


def test_an_explicit_checkpoint_folder_is_used_as_given(tmp_path: Path) -> None:
    first = save(tmp_path, 3, 0.3)
    save(tmp_path, 6, 0.6)
    assert find_checkpoint(tmp_path).name == "step_000006", "a run folder resumes from its newest"
    assert find_checkpoint(first) == first, "an explicit older checkpoint is not replaced by the newest"
    state, optimizer, rng = load_state(first)
    assert state["step"] == 3 and optimizer == {"lr": 0.3} and set(rng) == {"python", "numpy", "torch"}
    assert json.loads((first / "state.json").read_text())["schedule"] == {"stage": 3}
    assert resolve_model(str(first)) == str(first / "model")
    assert resolve_model(str(tmp_path)) == str(tmp_path / "checkpoints" / "step_000006" / "model")
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        find_checkpoint(tmp_path / "elsewhere")
