"""Experiment trackers: where the trainer's metric rows go besides ``metrics.jsonl``.

``train.loggers`` lists them (default ``[tensorboard]``; ``[]``: metrics.jsonl only):

* ``tensorboard``: ``<run_dir>/tensorboard/`` (``tensorboard --logdir runs``); the run's config
  and code version as the text ``config``.
* ``wandb``: Weights & Biases, **offline** by default: the run goes to
  ``<run_dir>/wandb/offline-run-*/`` and nothing leaves the machine until ``wandb sync
  <run_dir>/wandb/offline-run-*``. ``WANDB_MODE=online`` (with ``wandb login``) logs live;
  ``WANDB_PROJECT`` names the project (default ``arena``). The config and code version are the
  run's config.
* ``mlflow``: MLflow's tracking client with a local file store, ``<run_dir>/mlruns``
  (``mlflow ui --backend-store-uri <run_dir>/mlruns``); ``MLFLOW_TRACKING_URI`` sends it
  elsewhere; ``MLFLOW_EXPERIMENT_NAME`` names the experiment (default ``arena``). The config
  (flattened to dotted keys) and code version are the run's params.

wandb and mlflow are optional (``pip install 'arena[trackers]'``: wandb and mlflow-skinny) and
imported only when selected. A name not in :data:`LOGGERS` is a config error naming the valid
ones; a selected tracker whose package is missing is one line at start-up, before any model
loads (:func:`check_installed`). Each tracker gets the numeric, finite values of every row
(``step`` is the x-axis), the same numbers as ``metrics.jsonl``. A resumed run (``--resume``)
opens a new tracker run that starts after the checkpoint's step.

The code version (:func:`code_version`: arena's version and the git commit of the checkout,
if it is one) goes into each tracker and into the run folder's ``config.json`` (key ``code``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import BeforeValidator

from arena.core.errors import ConfigError
from arena.loop.component import Component, StepContext


class Logger(Protocol):
    """A tracker: opened with the run's folder and config, then one call per metric row."""

    def log(self, values: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """What a tracker logs of a metrics row: its finite numbers, except ``step`` (the x-axis)."""
    return {k: float(v) for k, v in row.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class TensorBoardLogger:
    def __init__(self, run_dir: Path, config: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        self.writer.add_text("config", "```\n" + json.dumps(config, indent=2) + "\n```", 0)

    def log(self, values: dict[str, float], step: int) -> None:
        for k, v in values.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    def __init__(self, run_dir: Path, config: dict[str, Any]):
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        self.run = wandb.init(
            mode=os.environ.get("WANDB_MODE", "offline"), dir=str(run_dir),  # type: ignore[arg-type]
            project=os.environ.get("WANDB_PROJECT", "arena"), name=run_dir.resolve().name, config=config,
            settings=wandb.Settings(console="off", silent=True), reinit="create_new",
        )

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()


def mlflow_key(key: str) -> str:
    """An MLflow metric or param name: characters it refuses (e.g. ``*`` of a seat pattern) become ``_``."""
    return re.sub(r"[^\w\-. /:]", "_", key)


def flatten(config: Any, prefix: str = "") -> dict[str, str]:
    """Nested config -> ``{"learner.lr": "1e-06", ...}`` (lists as JSON)."""
    if isinstance(config, dict) and config:
        out: dict[str, str] = {}
        for k, v in config.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: config if isinstance(config, str) else json.dumps(config)}


class MlflowLogger:
    MAX_PARAM = 6000  # MLflow's limit on a param's value

    def __init__(self, run_dir: Path, config: dict[str, Any]):
        uri = os.environ.get("MLFLOW_TRACKING_URI") or (run_dir / "mlruns").resolve().as_uri()
        if uri.startswith("file:"):  # MLflow 3 refuses its file store unless asked (it is in maintenance mode)
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self.Metric = Metric
        self.client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "arena")
        exp = self.client.get_experiment_by_name(name)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(name)
        self.run_id = self.client.create_run(exp_id, run_name=run_dir.resolve().name).info.run_id
        params = [Param(mlflow_key(k), v[: self.MAX_PARAM]) for k, v in flatten(config).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def log(self, values: dict[str, float], step: int) -> None:
        now = int(time.time() * 1000)
        metrics = [self.Metric(mlflow_key(k), v, now, step) for k, v in values.items()]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


#: name -> (the package it needs, its class)
LOGGERS: dict[str, tuple[str, type]] = {
    "tensorboard": ("tensorboard", TensorBoardLogger),
    "wandb": ("wandb", WandbLogger),
    "mlflow": ("mlflow", MlflowLogger),
}


def check_names(names: Sequence[str]) -> list[str]:
    """``train.loggers``' validator: known names, each once (ValueError names the valid ones)."""
    for name in names:
        if name not in LOGGERS:
            raise ValueError(f"unknown logger {name!r}; valid: {', '.join(LOGGERS)}")
    return list(dict.fromkeys(names))


def check_installed(names: Sequence[str]) -> None:
    """One line (ConfigError) for a selected tracker whose package is missing; imports nothing."""
    for name in names:
        package = LOGGERS[name][0]
        if importlib.util.find_spec(package) is None:
            extra = " (pip install 'arena[trackers]')" if name != "tensorboard" else ""
            raise ConfigError(f"train.loggers: {name!r} is selected but the {package} package is not installed; "
                              f"pip install {package}{extra}, or remove {name} from train.loggers")


def check_reachable(names: Sequence[str], timeout: float = 5.0) -> None:
    """One line (ConfigError) when mlflow is selected with an HTTP ``MLFLOW_TRACKING_URI`` that does not
    answer within ``timeout`` seconds: MLflow's client would retry for minutes before the first step."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if "mlflow" not in names or not uri.startswith(("http://", "https://")):
        return
    import httpx

    try:
        httpx.get(uri.rstrip("/") + "/health", timeout=timeout)
    except httpx.HTTPError as e:
        raise ConfigError(f"train.loggers: mlflow: MLFLOW_TRACKING_URI={uri} does not answer ({type(e).__name__}: "
                          f"{' '.join(str(e).split())[:120]}); start the tracking server, unset the variable for a "
                          "local file store, or remove mlflow from train.loggers") from None


def code_version() -> dict[str, Any]:
    """arena's version and, when arena runs from a git checkout, its commit and whether it has local changes."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        arena_version = version("arena")
    except PackageNotFoundError:
        arena_version = None
    out: dict[str, Any] = {"arena_version": arena_version, "git_commit": None, "git_dirty": None}
    root = Path(__file__).resolve().parents[3]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit:
        out["git_commit"] = commit
        status = git("status", "--porcelain", "--untracked-files=no")
        out["git_dirty"] = None if status is None else bool(status)
    return out


def _names(value: Any) -> Any:
    if isinstance(value, str):  # --set train.loggers=wandb
        value = [value]
    return check_names(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else value


class Loggers(Component):
    """The selected trackers of a run, opened at the first row (so a run that fails to start leaves none)."""

    name = "loggers"
    section = Annotated[list[str], BeforeValidator(_names)]
    section_default = staticmethod(lambda: ["tensorboard"])
    section_doc = ("Experiment trackers besides metrics.jsonl: any of tensorboard, wandb (offline), mlflow (a file "
                   "store in the run folder); [] for none (arena/loop/components/loggers.py).")

    def __init__(self, names: Sequence[str], run_dir: Path, config: dict[str, Any], main: bool = True):
        self.names = list(names)
        self.run_dir = run_dir
        self.config = config
        self.main = main
        self.open: list[Logger] | None = None

    @classmethod
    def prepare(cls, plan: Any) -> None:
        check_installed(plan.cfg.train.loggers)  # before any model loads
        check_reachable(plan.cfg.train.loggers)

    @classmethod
    def build(cls, plan: Any, parts: Any) -> Loggers:
        """Write the run's config.json (rank 0) and open its trackers (rank 0 only)."""
        main = parts.dist.main
        config = resolved_config(plan.cfg) | {"code": code_version()} if main else {}
        if main:
            (parts.run_dir / "config.json").write_text(json.dumps(config, indent=2))
        return cls(plan.cfg.train.loggers, parts.run_dir, config, main)

    def logged(self, ctx: StepContext, row: dict[str, Any]) -> None:
        if self.main:
            self.log(row)

    def finish(self) -> None:
        self.close()

    def log(self, row: dict[str, Any]) -> None:
        if self.open is None:
            self.open = [LOGGERS[name][1](self.run_dir, self.config) for name in self.names]
        values, step = scalars(row), int(row["step"])
        for logger in self.open:
            logger.log(values, step)

    def close(self) -> None:
        for logger in self.open or []:
            logger.close()
        self.open = None


def resolved_config(cfg: Any) -> dict[str, Any]:
    """The run's full config as JSON (game settings inlined), written to config.json."""
    game = {"name": cfg.game.name, **cfg.game.settings.model_dump(mode="json", by_alias=True)}
    return cfg.model_dump(mode="json", exclude={"game"}, by_alias=True) | {"game": game}
