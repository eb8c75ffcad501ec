"""The training loop's kernel: play -> samples -> update -> weight sync -> log -> checkpoint.

The kernel keeps a list of components (arena/loop/component.py) and knows none of them by name:
a warm start, evaluations, a league, async rollouts, the sync canary, exact descent and the rest
come in through the hooks, and saving and restoring loop over their state.

Rollouts of step ``s`` use the seeds ``seed * 1_000_003 + s * games_per_step + i``,
and every sampling call is seeded from its requests, so a run resumed from a
checkpoint replays exactly the steps an uninterrupted run would have played.

Several ranks (``torchrun``/``deepspeed`` launchers, arena/core/distributed.py): rank ``r`` of
``W`` plays the ``r``-th contiguous block of the step's seeds; the episodes are gathered so
every rank builds the whole step's samples (same advantages, estimator and game states as
one rank) and trains the samples of its own episodes; rank 0 alone writes metrics,
TensorBoard, episodes and checkpoints, which also hold the other ranks' RNG states.
"""

from __future__ import annotations

import json
import math
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from arena.core.distributed import SINGLE, Dist, barrier, gather, sum_values
from arena.core.errors import ConfigError
from arena.learners.progress import Progress
from arena.learners.samples import build_samples
from arena.loop.checkpoint import find_checkpoint, gather_ranks, load_state, save_checkpoint, set_rng_state
from arena.loop.component import StepContext
from arena.loop.config import ArenaConfig
from arena.loop.steps import (  # noqa: F401 - re-exported: the tests and the CLIs import them from here
    TIMING_KEYS, episode_summary, local_samples, no_samples_message, row_step, seed_everything, tokenize_probes,
)
from arena.loop.weights import load_policies, push_weights, restore_weights, save_policies
from arena.runner import EpisodeSpec


class Trainer:
    """Rollouts with the policy table, advantages and an update of each trainable policy, per step."""

    def __init__(self, cfg: ArenaConfig, run_dir: Path, resume: Path | None = None, dist: Dist = SINGLE,
                 parts: Any = None, plan: Any = None):
        """``parts``: the :class:`~arena.loop.build.Built` run :func:`~arena.loop.build.build_trainer` makes from
        ``cfg`` (built here when not given; from ``plan`` when it is resolved already)."""
        from arena.loop.build import build_trainer

        built = parts if parts is not None else build_trainer(cfg, run_dir, resume, dist, plan)
        self.cfg, self.run_dir, self.dist = cfg, run_dir, dist
        self.step = 0
        self.policies, self.trained, self.schedule = built.policies, built.trained, built.schedule
        self.runner, self.probe_env, self.components = built.runner, built.probe_env, built.components
        first = self.trained[0]  # the config's first trainable policy (the only one, in most runs)
        self.generator, self.tokenizer, self.learner = first.generator, first.tokenizer, first.learner
        self.metrics_path = run_dir / "metrics.jsonl"
        if resume is not None:
            try:
                checkpoint = find_checkpoint(resume)
            except FileNotFoundError as e:  # killed before its first checkpoint: nothing to continue
                raise ConfigError(f"--resume: {e}; start the run again without --resume") from None
            self._restore(checkpoint)
        elif self.metrics_path.exists() and dist.main:
            self.metrics_path.unlink()
        self.last_step = cfg.train.steps

    def feature(self, name: str) -> Any:
        """The run's component ``name`` (``league``, ``evals``...), or ``None`` when the run has none."""
        return self.components.get(name)

    # -------------------------------------------------------------- the loop
    def run(self, max_steps: int | None = None) -> list[dict[str, float]]:
        self.last_step = self.cfg.train.steps if max_steps is None else min(self.cfg.train.steps, max_steps)
        rows: list[dict[str, float]] = []
        try:
            row0 = self.components.merged("start", self)  # a warm start; the untrained model's evaluations
            stopped = None
            if row0:
                self._log(StepContext(0, None, []), {"step": 0, **row0})
                stopped = self._should_stop(row0)
            while self.step < self.last_step and stopped is None:
                row = self.train_step()
                stopped = self._should_stop(row)
                rows.append(row)
                if self.step % self.cfg.train.checkpoint_every == 0 or self.step == self.last_step or stopped:
                    self.save()
        finally:  # a stopped run's trackers keep what was logged
            self.components.each("finish")
        return rows

    def _should_stop(self, row: dict[str, Any]) -> Any:
        """After a logged row: the reason a component stops the run, if any (rank 0 decides for every rank)."""
        reason = self.components.first("should_stop", row) if self.dist.main else None
        return gather(self.dist, reason)[0] if self.dist.active else reason

    def specs(self, step: int) -> list[EpisodeSpec]:
        """The games of ``step``: seeds ``seed * 1_000_003 + step * n + i``, disjoint across steps."""
        n = self.cfg.train.games_per_step
        return [EpisodeSpec(seed=self.cfg.train.seed * 1_000_003 + step * n + i) for i in range(n)]

    def play_step(self, step: int) -> tuple[list[Any], dict[str, float]]:
        """The games of ``step`` with the generators as they are, and the rollout's figures (this rank's)."""
        generators = list({id(u.generator): u.generator for u in self.trained}.values())
        tokens_before = sum(getattr(g, "tokens_generated", 0) for g in generators)
        figures = self.components.merged("before_play", step)
        t0 = time.perf_counter()
        episodes = self.runner.play(self.dist.block(self.components.assign(step, self.specs(step))))
        tokenize_probes(self.trained, episodes)
        tokens = float(sum(getattr(g, "tokens_generated", 0) for g in generators) - tokens_before)
        return episodes, {"gen/tokens": tokens, "time/play_s": time.perf_counter() - t0, **figures}

    def train_step(self) -> dict[str, Any]:
        progress = Progress(step=self.step + 1, total=self.cfg.train.steps)
        ctx = StepContext(self.step + 1, progress, self.schedule.phases(progress), self.last_step,
                          times={"start": time.perf_counter()})
        ctx.episodes, ctx.played = self.components.first("play", ctx.step) or self.play_step(ctx.step)
        mine = None
        if self.dist.active:  # every rank sees the whole step; each trains its own episodes' samples
            mine = {ep.episode_id for ep in ctx.episodes}
            ctx.episodes = [ep for part in gather(self.dist, ctx.episodes) for ep in part]
        ctx.times["played"] = time.perf_counter()
        for unit in self.trained:  # each policy learns from its own seats' turns only
            samples, sample_stats = self.components.first("samples", ctx, unit) or build_samples(
                ctx.episodes, ctx.phases, unit.learner.cfg, unit.estimator_states, unit.name)
            self.components.each("before_update", ctx, unit, samples)
            local = local_samples(self.cfg, self.dist, ctx.episodes, samples, mine) if mine is not None else None
            learn_stats = unit.learner.step(samples, progress, local=local)
            if not samples:
                print(f"step {ctx.step}: {no_samples_message(ctx.episodes, ctx.phases, unit.name)}", file=sys.stderr)
            ctx.stats[unit.name] = {**sample_stats, **learn_stats, **unit.estimator_states.metrics()}
        ctx.times["updated"] = time.perf_counter()
        with self.components.guard(ctx.step):  # async rollouts: no game is played meanwhile
            self.sync_weights()
            for unit in self.trained:
                ctx.stats[unit.name].update(self.components.merged("after_sync", ctx, unit))
            ctx.times["synced"] = time.perf_counter()
            summary = episode_summary(ctx.episodes)
            summary.update({f"game/{k}": v for k, v in self.probe_env.step_metrics(ctx.episodes).items()})
            self.schedule.update({k.removeprefix("game/"): v for k, v in summary.items() if k.startswith("game/")})
            self.step = ctx.step
            extra = self.components.merged("after_step", ctx)
        row = self._row(ctx, summary, extra)
        self._log(ctx, row)
        return row

    def _row(self, ctx: StepContext, summary: dict[str, float], extra: dict[str, Any]) -> dict[str, Any]:
        """The step's metrics: the games, each policy's figures, the timings, then the components'."""
        tokens = ctx.played.get("gen/tokens", 0.0)
        if self.dist.active:  # every rank's tokens (the gather made "played" the slowest rank's end of rollout)
            tokens = sum_values(self.dist, {"tokens": float(tokens)})["tokens"]
        row: dict[str, Any] = {"step": ctx.step, "stage": "+".join(ctx.phases), **summary}
        several = len(self.trained) > 1  # then each policy's figures carry its name: "<policy>/kl"
        for name, figures in ctx.stats.items():
            row.update({f"{name}/{k}" if several else k: v for k, v in figures.items()})
        t = ctx.times
        row.update({
            "time/rollout_s": t["played"] - t["start"], "time/update_s": t["synced"] - t["played"],
            "time/step_s": t["synced"] - t["start"], "gen/tokens": float(tokens),
            "gen/tokens_per_s": tokens / max(ctx.played.get("time/play_s", 0.0), 1e-9),
        })
        row.update({k: v for k, v in ctx.played.items() if k not in ("gen/tokens", "time/play_s")})
        row.update(extra)  # after the weight sync and the state update; outside the step's timing
        return row

    def sync_weights(self, force: bool = False) -> None:
        """Push each trainable policy's weights into its generator (:func:`~arena.loop.weights.push_weights`).
        ``force``: push even when the generator holds the learner's version (weights loaded from a checkpoint)."""
        for unit in self.trained:
            push_weights(unit, force)

    # -------------------------------------------------------------- logging
    def _log(self, ctx: StepContext, row: dict[str, Any]) -> None:
        if self.dist.main:
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}) + "\n")
        self.components.each("logged", ctx, row)

    # -------------------------------------------------------------- checkpoints
    def save(self) -> Path | None:
        """Write the step's checkpoint (rank 0; the other ranks hand it their own state and wait)."""
        first = self.trained[0]
        state = {"estimators": first.estimator_states.state_dict(), "schedule": self.schedule.state_dict(),
                 **self.components.state()}
        gathered = gather_ranks(self.dist, first.learner)
        if gathered is None:  # a rank other than 0: its state is with rank 0
            return None
        optimizer, extra = gathered
        self.components.each("before_save", self.step)
        extra |= self.components.writers()
        if len(self.trained) > 1:  # the first policy is the checkpoint's model/; the others in policies/<name>/
            extra["policies"] = partial(save_policies, self.trained[1:])
        path = save_checkpoint(self.run_dir, self.step, first.learner.module, first.tokenizer, optimizer, state,
                               keep=self.cfg.train.keep_checkpoints, extra=extra or None)
        self.components.each("after_save", self.run_dir)
        barrier(self.dist)
        return path

    def _restore(self, checkpoint: Path) -> None:
        state, optimizer, rng = load_state(checkpoint)
        own = checkpoint / "ranks" / f"rank_{self.dist.rank}.pt"
        if self.dist.rank and own.is_file():  # rank R's own RNG; else (another world size) rank 0's
            rng = torch.load(own, weights_only=False)["rng"]
        first = self.trained[0]
        restore_weights(first.learner.module, checkpoint / "model")
        first.learner.load_state_dict(optimizer)
        first.estimator_states.load_state_dict(state["estimators"])
        load_policies(self.trained[1:], checkpoint)
        self.schedule.load_state_dict(state["schedule"])
        self.components.load(state, checkpoint)
        set_rng_state(rng)
        self.step = int(state["step"])
        self.sync_weights(force=True)
        if self.metrics_path.exists() and self.dist.main:  # drop rows written after the checkpoint
            kept = [line for line in self.metrics_path.read_text().splitlines() if line and row_step(line) <= self.step]
            self.metrics_path.write_text("".join(line + "\n" for line in kept))
