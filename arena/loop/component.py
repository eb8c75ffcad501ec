"""The component protocol: a training feature as one module the trainer kernel knows nothing about.

The kernel (arena/loop/trainer.py) plays a step's games, turns them into samples, updates each
trainable policy, syncs its weights, logs a row and checkpoints. A **component** is everything
else a run may do: a warm start, evaluations, a league, async rollouts, the sync canary, the
responders, exact descent, the stop rule, the episode log, the trackers, the game's state. It is
one class in one module (the registry, arena/loop/components/__init__.py, lists them in order) that
owns:

* **its config section**: ``section``, a pydantic type mounted under ``train.<name>`` (``None``: no
  section; ``section_default``: the value when the YAML leaves it out). ``renamed`` maps old flat
  ``train.*`` keys to their place in the section, loaded with a deprecation line;
* **its checks**: :meth:`check`, one-line ``ConfigError`` at start-up, no model loaded;
* **how it is built**: :meth:`build` from the resolved :class:`~arena.loop.plan.Plan` and the
  kernel's :class:`Parts`; ``None`` when the run does not use it;
* **the hooks it needs**, below, each a no-op by default. They run in registry order;
* **its state** for exact resume: :meth:`state_dict` (small, JSON, in the checkpoint's
  ``state.json`` under ``name``) and :meth:`writer` / :meth:`load` (files in ``<checkpoint>/<folder>/``).

Hooks, in the order a step meets them (``ctx``: the step's :class:`StepContext`)::

    start(loop) -> row items         run() begins (a warm start; evaluations of the untrained model)
    before_play(step) -> figures     before the step's games (responders); may run in the rollout thread
    assign(step, specs) -> specs     who plays which seat (the league); may run in the rollout thread
    play(step) -> (episodes, figures) | None     the step's games from elsewhere (async rollouts, descent)
    samples(ctx, unit) -> (samples, stats) | None   a unit's samples from elsewhere (descent)
    before_update(ctx, unit, samples)              the canary's pre-update scores, the episode log
    guard(step) -> context manager   held around the weight sync and after_sync / after_step (async's lock)
    after_sync(ctx, unit) -> figures               the canary's gap, per trainable policy
    after_step(ctx) -> row items     the game's state, evaluations, the league's results
    logged(ctx, row)                 after metrics.jsonl has the row: trackers, the canary's stop
    should_stop(row) -> reason | None              the stop rule (rank 0)
    before_save(step) / after_save(run_dir)        the league's pool around a checkpoint (rank 0)
    finish()                          run() ends, also on an error
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from arena.core.distributed import Dist
    from arena.loop.plan import Plan


@dataclass
class Parts:
    """What the kernel built, handed to each component's :meth:`Component.build`."""

    policies: dict[str, Any]  # the run's policy table
    trained: list[Any]  # one Trained unit per trainable policy, the config's first first
    runner: Any
    probe_env: Any  # an env of the game: step metrics, exact queries
    state: Any  # the game's cross-episode state, or None
    sampling: Any  # (policy, phase) -> SamplingParams
    run_dir: Path
    dist: Dist
    resume: Path | None


@dataclass
class StepContext:
    """One step as the hooks see it; the kernel fills it as the step goes."""

    step: int
    progress: Any
    phases: list[str]
    last: int = 0  # the run's last step (run()'s max_steps, else train.steps)
    episodes: list[Any] = field(default_factory=list)
    played: dict[str, float] = field(default_factory=dict)  # the play's own figures (tokens, time)
    stats: dict[str, dict[str, float]] = field(default_factory=dict)  # per trainable policy
    times: dict[str, float] = field(default_factory=dict)  # perf_counter marks: start, played, updated, synced


class Component:
    """Base class: no section, no checks, every hook a no-op (module docstring)."""

    name: ClassVar[str] = ""
    section: ClassVar[Any] = None  # the pydantic type of train.<name>, or None
    section_default: ClassVar[Any] = None  # a factory of the value when the YAML leaves it out
    section_doc: ClassVar[str] = ""  # the section's description in the config schema
    renamed: ClassVar[Mapping[str, str]] = {}  # old flat train.<key> -> its key in the section
    folder: ClassVar[str] = ""  # its files' folder in a checkpoint (default: name)
    key: ClassVar[str] = ""  # its section's YAML key when that is no Python name (``async``); default: name

    @classmethod
    def migrate(cls, train: dict[str, Any]) -> list[str]:
        """Move the old flat ``train.<key>`` settings of ``renamed`` into this section, in place (the raw YAML
        of ``train``, before validation); one deprecation note each. A setting given both ways is refused."""
        notes = []
        key = cls.key or cls.name
        for old, new in cls.renamed.items():
            if old not in train:
                continue
            section = train.setdefault(key, {})
            if not isinstance(section, dict):
                raise ValueError(f"{old}: moved to train.{key}.{new}, but train.{key} is not a mapping")
            if new in section:
                raise ValueError(f"{old}: given twice, as train.{old} and train.{key}.{new}; keep train.{key}.{new}")
            section[new] = train.pop(old)
            notes.append(f"train.{old} is now train.{key}.{new}")
        return notes

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        """One-line ``ConfigError`` for a config this component cannot run (no model loaded)."""

    @classmethod
    def prepare(cls, plan: Plan) -> None:
        """Start-up checks of a training run that need the plan (packages, a server), before any model loads."""

    @classmethod
    def build(cls, plan: Plan, parts: Parts) -> Component | None:
        """The component for this run, or ``None`` when the run does not use it."""
        return None

    # ------------------------------------------------------------------ hooks
    def start(self, loop: Any) -> dict[str, float]:
        return {}

    def before_play(self, step: int) -> dict[str, float]:
        return {}

    def assign(self, step: int, specs: list[Any]) -> list[Any]:
        return specs

    def play(self, step: int) -> tuple[list[Any], dict[str, float]] | None:
        return None

    def samples(self, ctx: StepContext, unit: Any) -> tuple[list[Any], dict[str, float]] | None:
        return None

    def before_update(self, ctx: StepContext, unit: Any, samples: Sequence[Any]) -> None:
        pass

    def guard(self, step: int) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def after_sync(self, ctx: StepContext, unit: Any) -> dict[str, float]:
        return {}

    def after_step(self, ctx: StepContext) -> dict[str, float]:
        return {}

    def logged(self, ctx: StepContext, row: dict[str, Any]) -> None:
        pass

    def should_stop(self, row: dict[str, Any]) -> str | None:
        return None

    def before_save(self, step: int) -> None:
        pass

    def after_save(self, run_dir: Path) -> None:
        pass

    def finish(self) -> None:
        pass

    # ------------------------------------------------------------------ state
    def state_dict(self) -> Any:
        """JSON-able state for the checkpoint's state.json (``None``: nothing to keep)."""
        return None

    def load_state_dict(self, state: Any) -> None:
        pass

    def writer(self) -> Callable[[Path], None] | None:
        """What writes this component's files into ``<checkpoint>/<folder>/`` at a save (rank 0); None: no files."""
        return None

    def load(self, checkpoint: Path, step: int) -> None:
        """Read this component's files back from the checkpoint of ``step`` (``--resume``)."""


class Components:
    """The run's components in registry order, and the hooks called over all of them."""

    def __init__(self, items: Sequence[Component]):
        self.items = list(items)
        self.by_name = {c.name: c for c in self.items}

    def __iter__(self) -> Iterator[Component]:
        return iter(self.items)

    def get(self, name: str) -> Component | None:
        return self.by_name.get(name)

    def merged(self, hook: str, *args: Any) -> dict[str, Any]:
        """Every component's ``hook(*args)`` (a dict each), merged in registry order."""
        out: dict[str, Any] = {}
        for c in self.items:
            out.update(getattr(c, hook)(*args) or {})
        return out

    def each(self, hook: str, *args: Any) -> None:
        for c in self.items:
            getattr(c, hook)(*args)

    def first(self, hook: str, *args: Any) -> Any:
        """The first component's non-``None`` answer to ``hook(*args)``, else ``None``."""
        for c in self.items:
            found = getattr(c, hook)(*args)
            if found is not None:
                return found
        return None

    def assign(self, step: int, specs: list[Any]) -> list[Any]:
        for c in self.items:
            specs = c.assign(step, specs)
        return specs

    @contextlib.contextmanager
    def guard(self, step: int) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for c in self.items:
                stack.enter_context(c.guard(step))
            yield

    def state(self) -> dict[str, Any]:
        return {c.name: s for c in self.items if (s := c.state_dict()) is not None}

    def writers(self) -> dict[str, Callable[[Path], None]]:
        return {c.folder or c.name: w for c in self.items if (w := c.writer()) is not None}

    def load(self, state: Mapping[str, Any], checkpoint: Path) -> None:
        for c in self.items:
            c.load_state_dict(state.get(c.name))
            c.load(checkpoint, int(state["step"]))
