"""Experiment trackers (arena/loop/components/loggers.py): a real tiny training run logs to TensorBoard, wandb
(offline) and mlflow (a file store in the run folder), and each holds the numbers of metrics.jsonl,
read back with the trackers' own readers (wandb's run file is read record by record with wandb's own
protobuf messages). Bad names and missing packages: one line at start-up, exit 2, before any model loads."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from arena.cli import run_cli
from arena.loop.components.loggers import code_version, mlflow_key, scalars
from forked_runs import digit_model
from test_league import tiny_model  # noqa: F401  (the fixture)
from tolerance import approx32

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    "policies.learner.sampling.max_new_tokens=4", "game.max_bid=10000", "train.games_per_step=2", "train.steps=3",
    "train.checkpoint_every=3", "train.plot=false", "learner.lr=1e-3", "train.episodes.save=false",
    "runner.progress=false", "train.loggers=[tensorboard,wandb,mlflow]",
]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from arena.train import main

    with pytest.raises(SystemExit) as done:
        run_cli(lambda: main(argv))
    return int(done.value.code), capsys.readouterr().err


def test_a_bad_logger_name_is_one_line_naming_the_field_the_value_and_the_valid_names(capsys, tmp_path) -> None:
    rc, err = _cli(["examples/sealed_bid.yaml", "--set", "train.loggers=[tensorboard,neptune]",
                    "--run-dir", str(tmp_path / "run")], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert "train.loggers" in err and "'neptune'" in err and "tensorboard, wandb, mlflow" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("package", ["wandb", "mlflow"])
def test_a_selected_tracker_that_is_not_installed_stops_before_any_model_loads(package, capsys, tmp_path,
                                                                                monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # what `import wandb` sees when it is not installed
    rc, err = _cli(["examples/sealed_bid.yaml", "--set", f"train.loggers=[{package}]",
                    "--set", "policies.learner.model=smollm2-135m",  # never loaded: the check comes first
                    "--run-dir", str(tmp_path / "run")], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith("error: train.loggers:") and f"{package!r} is selected" in err and "arena[trackers]" in err


def test_scalars_are_the_finite_numbers_of_a_row() -> None:
    row = {"step": 3, "stage": "bid", "kl": 0.5, "n": 2, "bad": float("nan"), "inf": float("inf"), "flag": True}
    assert scalars(row) == {"kl": 0.5, "n": 2.0}


def wandb_records(path: Path) -> list[Any]:
    """The records of a ``.wandb`` run file: a 7-byte header (``:W&B``, magic, version), then LevelDB-log
    chunks in 32 KiB blocks (crc32, length, type: 1 whole, 2 first, 3 middle, 4 last), each record a
    ``wandb_internal_pb2.Record``."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if n == 0 and kind == 0:
            pos += left
            continue
        buf += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
            buf = b""
    return out


@pytest.fixture(scope="module")
def tracked_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, zygote) -> Path:  # noqa: F811
    model = digit_model(tiny_model, tmp_path_factory.mktemp("digits") / "model")
    run = tmp_path_factory.mktemp("tracked") / "run"
    argv = ["examples/sealed_bid.yaml", *[a for s in [f"policies.learner.model={model}", *SETS] for a in ("--set", s)],
            "--run-dir", str(run)]
    rc = zygote.run(argv, run.parent / "train.log")
    assert rc == 0, (run.parent / "train.log").read_text()[-3000:]
    return run


def _expected(run: Path) -> dict[int, dict[str, float]]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    expected = {r["step"]: scalars(r) for r in rows}
    assert all(len(v) > 10 for v in expected.values())
    return expected


def test_config_json_records_the_code_version(tracked_run: Path) -> None:
    code = json.loads((tracked_run / "config.json").read_text())["code"]
    assert code == code_version() and code["arena_version"]
    if (ROOT / ".git").exists():  # a checkout (a worktree's .git is a file); an unpacked sdist has none
        assert code["git_commit"] and len(code["git_commit"]) == 40 and isinstance(code["git_dirty"], bool)


def test_wandb_offline_holds_the_metrics_and_the_config(tracked_run: Path) -> None:
    files = list((tracked_run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    history, config = {}, {}
    for rec in wandb_records(files[0]):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            history[rec.history.step.num] = {k: v for k, v in items.items() if not k.startswith("_")}
        elif kind in ("run", "config"):
            update = rec.run.config.update if kind == "run" else rec.config.update
            config.update({i.key: json.loads(i.value_json) for i in update})
    assert history == _expected(tracked_run)
    code = json.loads((tracked_run / "config.json").read_text())["code"]
    assert config["code"] == code and config["learner"]["lr"] == 1e-3 and config["game"]["name"].endswith("sealed_bid:SealedBidGame")


def test_mlflow_file_store_holds_the_metrics_and_the_params(tracked_run: Path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(tracked_run / "mlruns").resolve().as_uri())
    exp = client.get_experiment_by_name("arena")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    expected = _expected(tracked_run)
    got: dict[int, dict[str, float]] = {step: {} for step in expected}
    for key in {k for row in expected.values() for k in row}:
        for m in client.get_metric_history(run.info.run_id, mlflow_key(key)):
            got[m.step][key] = m.value
    assert got == expected
    assert set(run.data.metrics) == {mlflow_key(k) for row in expected.values() for k in row}
    code = json.loads((tracked_run / "config.json").read_text())["code"]
    assert run.data.params["code.git_commit"] == code["git_commit"]
    assert run.data.params["code.arena_version"] == code["arena_version"] and run.data.params["learner.lr"] == "0.001"


def test_tensorboard_holds_the_metrics(tracked_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tracked_run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    got: dict[int, dict[str, float]] = {}
    for tag in acc.Tags()["scalars"]:
        for ev in acc.Scalars(tag):
            got.setdefault(ev.step, {})[tag] = ev.value
    expected = _expected(tracked_run)
    assert got.keys() == expected.keys()
    for step, row in expected.items():  # TensorBoard stores float32
        assert got[step] == approx32(row)
    assert "config/text_summary" in acc.Tags()["tensors"]


def test_the_viewer_plays_with_a_run_config_that_records_the_code_version(tmp_path: Path) -> None:
    from arena.loop.config import load_config
    from arena.loop.config import resolved_config
    from arena.view.play import PlayHost

    cfg = load_config(ROOT / "examples/sealed_bid.yaml")
    host = PlayHost(tmp_path, resolved_config(cfg) | {"code": code_version()})
    assert host.load("run").game.name == cfg.game.name
