"""Model resolution: built-in conversion cache, local folders, hub ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.core.models import BUILTIN_MODELS, _COMPLETE, cache_root, load_causal_lm, resolve_model


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


def _tiny_model(folder: Path, architecture: str = "LlamaForCausalLM") -> Path:
    """A real, tiny (random) model folder: enough for resolution and loading, no download."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128,
    )
    getattr(transformers, architecture)(config).save_pretrained(folder)
    return folder


def _run_folder(tmp_path: Path, steps: list[int]) -> Path:
    run = tmp_path / "run"
    for step in steps:
        _tiny_model(run / "checkpoints" / f"step_{step:06d}" / "model")
    return run


def test_checkpoint_folder_resolves_to_its_model(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    run = _run_folder(tmp_path, [12])
    checkpoint = run / "checkpoints" / "step_000012"
    assert resolve_model(str(checkpoint)) == str(checkpoint / "model")
    assert AutoModelForCausalLM.from_pretrained(resolve_model(str(checkpoint))).config.hidden_size == 16


def test_run_folder_resolves_to_the_newest_complete_checkpoint(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, [9, 10, 2])
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step_000010" / "model")
    # Newer but incomplete (no weights), a temporary folder mid-save, a stray file: all ignored.
    incomplete = run / "checkpoints" / "step_000011" / "model"
    incomplete.mkdir(parents=True)
    (incomplete / "config.json").write_text("{}")
    _tiny_model(run / "checkpoints" / ".tmp-step_000013" / "model")
    (run / "checkpoints" / "step_000014").write_text("not a folder")
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step_000010" / "model")
    # Steps compare as numbers, not strings.
    _tiny_model(run / "checkpoints" / "step_1000000" / "model")
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step_1000000" / "model")


def test_a_run_folder_with_the_trainers_config_json_still_means_its_checkpoint(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, [4])
    (run / "config.json").write_text('{"policies": {}}')  # what arena.train writes beside checkpoints/
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step_000004" / "model")


def test_a_missing_folder_under_an_existing_one_is_not_taken_for_a_hub_id(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_model("runs/no_such_run")


def test_a_missing_checkpoint_path_of_three_parts_is_not_taken_for_a_hub_id(tmp_path: Path, monkeypatch) -> None:
    """A hub id is org/name; runs/x/checkpoints/step_000008 with no runs/ folder is a folder that is not there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_model("runs/x/checkpoints/step_000008")
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_run_folder_without_a_complete_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints" / ".tmp-step_000001" / "model").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"run folder .*run has no complete checkpoint \(checkpoints/step_"):
        resolve_model(str(run))


def test_reward_model_loader_refuses_a_causal_lm(tmp_path: Path) -> None:
    from arena.core.models import load_reward_model

    folder = _tiny_model(tmp_path / "lm")
    with pytest.raises(ValueError, match="is a LlamaForCausalLM, not a \\*ForSequenceClassification model"):
        load_reward_model(str(folder))
