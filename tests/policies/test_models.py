"""Model resolution: built-in conversion cache, local folders, hub ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.models import BUILTIN_MODELS, _COMPLETE, cache_root, load_causal_lm, resolve_model


def test_builtin_package_is_located() -> None:
    path = BUILTIN_MODELS["smollm2-135m"].locate()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


def test_local_folder_and_hub_id_and_errors(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == str(tmp_path)
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_model(str(tmp_path / ".."))
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_model("./missing-model-dir")


def test_cache_root_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ARENA_CACHE", str(tmp_path))
    assert cache_root() == tmp_path


@pytest.mark.slow
def test_builtin_conversion_is_cached_and_loads_from_a_local_folder(tmp_path: Path) -> None:
    folder = Path(resolve_model("smollm2-135m"))
    assert (folder / _COMPLETE).is_file() and (folder / "config.json").is_file()
    assert resolve_model("smollm2-135m") == str(folder)  # second call: no conversion
    model, tokenizer = load_causal_lm(str(folder), dtype="float32")
    assert tokenizer.padding_side == "left"
    assert model.config.model_type == "llama"


@pytest.mark.slow
def test_interrupted_conversion_is_redone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ARENA_CACHE", str(tmp_path))
    broken = tmp_path / "models" / "smollm2-135m"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{half written")
    folder = Path(resolve_model("smollm2-135m"))
    assert folder == broken and (folder / _COMPLETE).is_file()
    assert "half written" not in (folder / "config.json").read_text()
