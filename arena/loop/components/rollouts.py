"""Async rollouts (``train.async``): the games of later steps are played while the learner updates.

With ``max_staleness: k`` the games of step ``t`` are played by the generator holding
the weights after update ``max(0, t - 1 - k)``: exactly ``k`` versions old once the
pipeline is full, never more (``k = 0`` is the synchronous loop). The schedule is
fixed, not a race, so a run is reproducible and resumes exactly:

- a background thread plays step ``t`` as soon as the generator holds version
  ``t - 1 - k`` (or newer: it cannot be newer, see the next rule);
- the trainer syncs version ``v`` (after its update ``v``) only once step ``v + k``
  has been played, so every step is played by exactly its version;
- whoever uses the generator or the game state holds :attr:`Pipeline.lock`: the
  thread while it plays a step; the trainer while it syncs, runs the canary,
  updates the game state (which step ``v + k + 1`` then sees) and evaluates.
  The learner's update, the samples, logging and checkpoints overlap the games.

A checkpoint after step ``s`` holds the played steps ``s + 1 .. s + k`` (in flight:
played, not yet trained) as JSONL in ``<checkpoint>/inflight/``; ``--resume`` puts them
back, so nothing is dropped or played twice.

The thread's torch work (an hf generator's forward passes) runs beside the learner's in one
process, on one intra-op pool setting: with ``k > 0`` the pipeline gives each of the two half
the cores until it closes (arena/policies/hardware.py::set_torch_threads, which a user's
OMP_NUM_THREADS or torch.set_num_threads overrides) and says so at start-up.

The gap between the generator's weights and the learner's is what
``learner.importance`` (tis | mis) corrects per token; its ratios are logged as ``is/*``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import Episode
from arena.loop.component import Component, StepContext


class AsyncConfig(BaseModel):
    """Async rollouts: the next steps' games are played while the learner updates (arena/loop/components/rollouts.py)."""

    model_config = ConfigDict(extra="forbid")

    max_staleness: int = Field(
        default=1, ge=0, le=16, description="k: the games of step t are played with the weights of update t-1-k "
        "(k versions old; 0 = synchronous, bit-identical to no async).",
    )


Played = tuple[list[Episode], dict[str, float]]  # a step's episodes and the thread's own figures (tokens, time)


class Pipeline:
    """Plays steps ``start + 1 ..`` in a thread, each with the generator version its staleness allows."""

    def __init__(self, play: Callable[[int], Played], k: int, version: int, last: int,
                 inflight: dict[int, Played] | None = None):
        self.lock = threading.RLock()  # the generator and the game state
        self.k = k
        self.last = last
        self._cond = threading.Condition()
        self._version = version  # updates the generator holds
        self._ready: dict[int, Played] = dict(inflight or {})
        self._next = version + 1 + len(self._ready)  # the next step to play
        self._played_version: dict[int, int] = {}
        self._error: BaseException | None = None
        self._stop = False
        self._play = play
        self._threads = contextlib.ExitStack()  # k = 0 overlaps nothing: the threads stay as they are
        if k > 0:
            from arena.policies.hardware import torch_threads_for

            self._threads.enter_context(torch_threads_for(jobs=2, what="the async rollout thread beside the learner"))
        self._thread = threading.Thread(target=self._run, name="arena-rollouts", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    t = self._next
                    self._cond.wait_for(lambda: self._stop or t > self.last or self._version >= t - 1 - self.k)
                    if self._stop or t > self.last:
                        return
                    version = self._version
                with self.lock:
                    played = self._play(t)
                with self._cond:
                    self._ready[t] = played
                    self._played_version[t] = version
                    self._next = t + 1
                    self._cond.notify_all()
        except BaseException as e:  # handed to the trainer, which raises it in its own thread
            with self._cond:
                self._error = e
                self._cond.notify_all()

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self._cond:
            self._cond.wait_for(lambda: ready() or self._error is not None)
            if self._error is not None:
                raise self._error

    def take(self, step: int) -> Played:
        """The episodes of ``step`` (waits for the thread to play them)."""
        self._wait(lambda: step in self._ready)
        with self._cond:
            return self._ready.pop(step)

    def staleness(self, step: int) -> float:
        """Versions between the weights that played ``step`` and the learner's before its update (``step - 1``);
        NaN for a step put back from a checkpoint."""
        version = self._played_version.pop(step, None)
        return float("nan") if version is None else float(step - 1 - version)

    def before_sync(self, version: int) -> None:
        """Call before pushing weights ``version``: waits until step ``version + k`` (the last step of the
        old weights) has been played."""
        self._wait(lambda: self._next > min(version + self.k, self.last))

    def synced(self, version: int) -> None:
        """The generator now holds ``version``."""
        with self._cond:
            self._version = version
            self._cond.notify_all()

    def inflight(self, step: int) -> dict[int, Played]:
        """Played, not yet trained, after ``step``'s sync: steps ``step + 1 .. step + k`` (a copy)."""
        with self._cond:
            return {t: self._ready[t] for t in range(step + 1, min(step + self.k, self.last) + 1) if t in self._ready}

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join()
        self._threads.close()


def save_inflight(folder: Path, inflight: dict[int, Played]) -> None:
    """Each in-flight step as ``step_<t>.jsonl``: its figures on the first line, then one episode a line."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    for t, (episodes, figures) in inflight.items():
        lines = [json.dumps(figures)] + [ep.model_dump_json() for ep in episodes]
        (folder / f"step_{t}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_inflight(folder: Path) -> dict[int, Played]:
    import json

    out: dict[int, Played] = {}
    for path in sorted(folder.glob("step_*.jsonl")) if folder.is_dir() else []:
        first, *rest = path.read_text(encoding="utf-8").splitlines()
        out[int(path.stem.removeprefix("step_"))] = ([Episode.model_validate_json(line) for line in rest if line],
                                                      json.loads(first))
    return out


class AsyncRollouts(Component):
    """``train.async``: the steps' games come from the :class:`Pipeline`'s thread (module docstring)."""

    name = "async_"
    key = "async"
    folder = "inflight"
    section = AsyncConfig | None
    section_doc = ("Async rollouts: the next steps' games are played while the learner updates, with weights at most "
                   "max_staleness versions old (arena/loop/components/rollouts.py); null: synchronous.")

    def __init__(self, k: int, last: int):
        self.k, self.last = k, last
        self.pipeline: Pipeline | None = None
        self.inflight: dict[int, Played] = {}  # in-flight steps put back by --resume
        self.saving = 0

    @classmethod
    def prepare(cls, plan: Any) -> None:
        from arena.core.errors import ConfigError

        section = plan.cfg.train.async_
        if section is None or not section.max_staleness:
            return
        if plan.dist.active:
            raise ConfigError("train.async: async rollouts run on one rank for now; remove train.async or run one rank")
        if plan.cfg.train.league.enabled:
            raise ConfigError("train.async: async rollouts with train.league are not supported (the league assigns "
                              "opponents from checkpoints as they are written); turn one of them off")

    @classmethod
    def build(cls, plan: Any, parts: Any) -> AsyncRollouts | None:
        section = plan.cfg.train.async_
        return None if section is None else cls(section.max_staleness, plan.cfg.train.steps)

    def start(self, loop: Any) -> dict[str, float]:
        self.pipeline = Pipeline(loop.play_step, self.k, loop.step, self.last, self.inflight)
        self.inflight = {}
        return {}

    def play(self, step: int) -> Played | None:
        return self.pipeline.take(step) if self.pipeline is not None else None

    @contextlib.contextmanager
    def guard(self, step: int) -> Any:
        """The last step the old weights play must be played first; no game while the weights change."""
        pipeline = self.pipeline
        if pipeline is None:
            yield
            return
        pipeline.before_sync(step)
        with pipeline.lock:
            yield
            pipeline.synced(step)

    def after_step(self, ctx: StepContext) -> dict[str, float]:
        """``rollout_s`` is the wait for the thread's games; ``play_s`` their own time."""
        if self.pipeline is None:
            return {}
        return {"async/staleness": self.pipeline.staleness(ctx.step), "time/play_s": ctx.played.get("time/play_s", 0.0),
                "time/sync_wait_s": ctx.times["synced"] - ctx.times["updated"]}

    def before_save(self, step: int) -> None:
        self.saving = step

    def writer(self) -> Any:
        """Played, not yet trained: steps step+1 .. step+k."""
        if self.pipeline is None or not self.k:
            return None
        from functools import partial

        return partial(save_inflight, inflight=self.pipeline.inflight(self.saving))

    def load(self, checkpoint: Path, step: int) -> None:
        """The steps in flight at the checkpoint, played by their own (older) weights."""
        from arena.core.errors import ConfigError

        if not self.k:
            return
        self.inflight = load_inflight(checkpoint / "inflight")
        want = min(self.k, self.last - step)
        if len(self.inflight) != want:
            raise ConfigError(f"train.async.max_staleness: the checkpoint holds {len(self.inflight)} step(s) in flight, "
                              f"max_staleness {self.k} needs {want}; resume with the run's own max_staleness")

    def finish(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None
