"""Checkpoints are atomic: a failure mid-save leaves the previous ones intact and no half folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from arena.loop.checkpoint import TMP_PREFIX, find_checkpoint, list_checkpoints, load_state, save_checkpoint


class TinyModel(torch.nn.Module):
    def __init__(self, fail: bool = False):
        super().__init__()
        self.w = torch.nn.Linear(2, 2)
        self.fail = fail

    def save_pretrained(self, path: Path) -> None:
        path.mkdir(parents=True)
        torch.save(self.state_dict(), path / "weights.pt")
        if self.fail:
            raise KeyboardInterrupt("killed while saving")


class NoTokenizer:
    def save_pretrained(self, path: Path) -> None:
        (path / "tokenizer.json").write_text("{}")


def test_failed_save_leaves_previous_checkpoint(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, TinyModel(), NoTokenizer(), {"opt": 1}, {"baselines": {"spy": -0.5}}, keep=3)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, TinyModel(fail=True), NoTokenizer(), {}, {}, keep=3)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000001"]
    assert find_checkpoint(tmp_path).name == "step_000001"
    state, opt, _ = load_state(find_checkpoint(tmp_path))
    assert state == {"step": 1, "baselines": {"spy": -0.5}} and opt == {"opt": 1}
    save_checkpoint(tmp_path, 3, TinyModel(), NoTokenizer(), {}, {}, keep=3)
    assert not list((tmp_path / "checkpoints").glob(f"{TMP_PREFIX}*")), "stray temp folders are cleaned"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_under_torch_save_is_one_line(tmp_path: Path) -> None:
    """torch.save on a full disk that is not a tmpfs raises RuntimeError("... unexpected pos N vs M") while
    handling RuntimeError("basic_ios::clear: iostream error"), as when CI's disk filled at stop 21;
    /dev/full fails every write with ENOSPC the same way."""
    from arena.loop.checkpoint import CheckpointWriteError

    save_checkpoint(tmp_path, 1, TinyModel(), NoTokenizer(), {}, {}, keep=3)
    full = {"state": lambda folder: torch.save({"x": torch.zeros(1000)}, "/dev/full")}
    with pytest.raises(CheckpointWriteError) as err:
        save_checkpoint(tmp_path, 2, TinyModel(), NoTokenizer(), {}, {}, keep=3, extra=full)
    assert "\n" not in str(err.value) and "unexpected pos" in str(err.value)
    assert "step_000001, is intact" in str(err.value)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_000001"]


def test_only_the_newest_are_kept(tmp_path: Path) -> None:
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, TinyModel(), NoTokenizer(), {}, {}, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000004", "step_000005"]
    with pytest.raises(FileNotFoundError):
        find_checkpoint(tmp_path / "nothing")
