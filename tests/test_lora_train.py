"""LoRA runs end to end (``learner.lora``): real ``arena.train`` processes (tests/forked_runs.py).

Like tests/test_canary.py they train examples/sealed_bid.py on the tiny random model of
tests/test_league.py given a digit-writing head, with the generator on ``cpu:0`` and the learner
on ``cpu``: two float32 copies, so the hf generator really receives the merged weights after each
update. The withheld adapter is planted the way test_canary.py plants a stale sync: the child's
``Trainer.sync_weights`` does nothing, so the generator never gets the adapter. The slow tests run
the built-in model for 2 steps (examples/lowest_unique.py: rewards vary from the first step) with the hf
policy and, marked ``vllm``, with vLLM serving the adapter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from arena.loop.components.canary import FLOAT32_MAX_GAP
from forked_runs import digit_model
from test_chaos import assert_same_metrics, metrics
from test_league import tiny_model  # noqa: F401  (the fixture)
from tolerance import apart, close32

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    "policies.learner.sampling.max_new_tokens=4", "policies.learner.device=cpu:0", "game.max_bid=10000",
    "train.games_per_step=2", "train.steps=2", "train.checkpoint_every=1", "train.plot=false", "learner.lr=3e-2",
    "train.episodes.save=false", "learner.lora.r=4", "learner.lora.target_modules=[q_proj, v_proj, up_proj, down_proj]",
]


@pytest.fixture(scope="module")
def digits(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return digit_model(tiny_model, tmp_path_factory.mktemp("digits") / "model")


def _argv(model: Path, run: Path, *extra: str) -> list[str]:
    sets = [a for item in [f"policies.learner.model={model}", *SETS] for a in ("--set", item)]
    return ["examples/sealed_bid.yaml", *sets, "--run-dir", str(run), *extra]


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _synced(rows: list[dict]) -> list[dict]:
    """The steps that pushed the adapter and ran the canary: the first, and each later one that trained (a step
    with no sample changed no weight, so it does neither)."""
    assert all(("sync/canary_gap" in r) == (r["samples"] > 0 or r["step"] == 1) for r in rows), rows
    return [r for r in rows if "sync/canary_gap" in r]


def test_withheld_adapter_stops_the_run_and_a_delivered_one_passes(digits: Path, tmp_path: Path, zygote) -> None:
    rc = zygote.run(_argv(digits, tmp_path / "stale"), tmp_path / "stale.log", stale=True)
    err = (tmp_path / "stale.log").read_text()
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and err.rstrip().splitlines()[-1] == errors[0], err[-3000:]
    rows = _rows(tmp_path / "stale")
    gap = rows[-1]["sync/canary_gap"]
    assert gap > FLOAT32_MAX_GAP and f"after the step-{rows[-1]['step']} sync" in errors[0] and "stale" in errors[0]
    assert rows[-1]["sync/canary_update"] > FLOAT32_MAX_GAP  # the adapter's update is what went missing

    rc = zygote.run(_argv(digits, tmp_path / "synced"), tmp_path / "synced.log")
    assert rc == 0, (tmp_path / "synced.log").read_text()[-3000:]
    assert len(_rows(tmp_path / "synced")) == 2
    rows = _synced(_rows(tmp_path / "synced"))
    assert rows and all(r["sync/canary_gap"] <= FLOAT32_MAX_GAP for r in rows)
    assert any(r["sync/canary_update"] > FLOAT32_MAX_GAP for r in rows)  # the synced adapter really moved
    shown = ", ".join(f"{r['sync/canary_gap']:.2g}" for r in rows)
    print(f"\nLoRA canary gap: withheld {gap:.3g}, delivered {shown}")

    # The checkpoint holds the adapter alone, naming its base; it loads over the base anywhere a model goes.
    ckpt = tmp_path / "synced" / "checkpoints" / "step_000002"
    model_dir = ckpt / "model"
    assert (model_dir / "adapter_model.safetensors").is_file() and not (model_dir / "model.safetensors").exists()
    conf = json.loads((model_dir / "adapter_config.json").read_text())
    assert conf["base_model_name_or_path"] == str(digits.resolve()) and conf["r"] == 4
    from arena.core.models import load_causal_lm, resolve_model

    assert resolve_model(str(tmp_path / "synced")) == str(model_dir)  # a run folder: its newest checkpoint
    merged, tok = load_causal_lm(str(ckpt))
    base, _ = load_causal_lm(str(digits))
    from peft import PeftModel

    adapted = PeftModel.from_pretrained(load_causal_lm(str(digits))[0], str(model_dir))
    ids = torch.tensor([tok("Bid: 1234")["input_ids"]])
    with torch.no_grad():
        close32(merged(ids).logits, adapted(input_ids=ids).logits)
        assert apart(merged(ids).logits, base(ids).logits, 1e-4)


def test_lora_resume_matches_an_uninterrupted_run(digits: Path, tmp_path: Path, zygote) -> None:
    assert zygote.run(_argv(digits, tmp_path / "straight"), tmp_path / "straight.log") == 0
    run = tmp_path / "resumed"
    assert zygote.run(_argv(digits, run, "--set", "train.steps=1"), tmp_path / "first.log") == 0
    # The same run goes on to step 2 from its step-1 checkpoint (train.steps back at 2).
    rc = zygote.run(_argv(digits, run, "--resume", str(run)), tmp_path / "resumed.log")
    assert rc == 0, (tmp_path / "resumed.log").read_text()[-3000:]
    assert_same_metrics(metrics(run), metrics(tmp_path / "straight"))
    from safetensors.torch import load_file

    a = load_file(str(tmp_path / "straight" / "checkpoints" / "step_000002" / "model" / "adapter_model.safetensors"))
    b = load_file(str(run / "checkpoints" / "step_000002" / "model" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    # A full-weight run cannot resume from the adapter: one line, exit 2.
    sets = [a for item in [f"policies.learner.model={digits}", *SETS] if "lora" not in item for a in ("--set", item)]
    argv = ["examples/sealed_bid.yaml", *sets, "--run-dir", str(run), "--resume", str(run)]
    assert zygote.run(argv, tmp_path / "full.log") == 2
    err = (tmp_path / "full.log").read_text().strip().splitlines()
    assert err[-1].startswith("error:") and "holds a LoRA adapter" in err[-1] and "Traceback" not in "".join(err)


def _train_builtin(tmp_path: Path, policy: dict) -> Path:
    """examples/lowest_unique.py with four seats of the built-in model (12-token replies; an invalid reply
    costs 1, so rewards vary from the first step and the adapters really train), 2 steps of 2 games."""
    run = tmp_path / "run"
    cfg = {
        "game": {"name": "examples.lowest_unique:LowestUniqueGame", "n_players": 4, "k": 5, "invalid": {"mode": "penalty"}},
        "policies": {"learner": {"model": "smollm2-135m", "trainable": True, "sampling": {"max_new_tokens": 12}, **policy}},
        "runner": {"num_envs": 2, "progress": False},
        "learner": {"lr": 1e-3, "lora": {"r": 8}},
        "train": {"steps": 2, "games_per_step": 2, "checkpoint_every": 2, "plot": False, "episodes": {"save": False},
                  "loggers": []},
    }
    (tmp_path / "lowest.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    proc = subprocess.run([sys.executable, "-m", "arena.train", str(tmp_path / "lowest.yaml"), "--run-dir", str(run)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


@pytest.mark.slow
def test_lora_train_on_the_builtin_model_with_the_hf_policy(tmp_path: Path) -> None:
    # The generator on cpu:0: its own float32 copy, which receives the merged weights (and is checked).
    run = _train_builtin(tmp_path, {"device": "cpu:0"})
    rows = _rows(run)
    assert [r["step"] for r in rows] == [1, 2] and sum(r["samples"] for r in rows) > 0  # trained adapters to deliver
    assert all(r["sync/canary_gap"] <= FLOAT32_MAX_GAP for r in _synced(rows))
    assert (run / "checkpoints" / "step_000002" / "model" / "adapter_config.json").is_file()


@pytest.mark.vllm
@pytest.mark.slow
def test_lora_train_on_the_builtin_model_with_vllm_serving_the_adapter(tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="vLLM is not installed")
    run = _train_builtin(tmp_path, {"backend": "vllm", "dtype": "float32"})
    rows = _rows(run)
    assert [r["step"] for r in rows] == [1, 2] and sum(r["samples"] for r in rows) > 0
    # The engine served the learner's adapter after each update: the canary's float32 bound holds.
    synced = _synced(rows)
    assert all(r["sync/canary_gap"] <= FLOAT32_MAX_GAP for r in synced), [r["sync/canary_gap"] for r in synced]
    # one adapter version per update; the newest two are kept
    assert sorted(p.name for p in (run / ".adapter_sync").iterdir()) == [f"v{v}" for v in range(1, len(synced) + 1)][-2:]
