"""The training loop: rollout -> advantages -> update -> weight sync -> metrics -> checkpoint.

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

import contextlib
import json
import math
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arena.core.distributed import SINGLE, Dist, barrier, gather, gather_to_main, sum_values
from arena.core.errors import ConfigError
from arena.core.types import Episode, Sample, write_jsonl
from arena.loop.canary import canary_samples, canary_stats, check_gap, generator_logprobs
from arena.loop.checkpoint import find_checkpoint, list_checkpoints, load_state, rng_state, save_checkpoint, set_rng_state
from arena.loop.assemble import Trained, TrainerParts, precision_report, resolve_precision, resolved_config  # noqa: F401 - re-exported
from arena.loop.config import ArenaConfig
from arena.loop.descent import Descent
from arena.loop.respond import Responders, find_follower
from arena.loop.weights import load_policies, push_weights, restore_weights, save_policies, shares_model  # noqa: F401 - push_weights re-exported
from arena.runner import EpisodeSpec, generate_texts
from arena.learners.progress import Progress
from arena.learners.samples import build_samples

TIMING_KEYS = ("time/rollout_s", "time/update_s", "time/step_s", "gen/tokens_per_s", "time/eval_s", "time/respond_s",
               "time/descent_s")


def seed_everything(seed: int) -> None:
    """Global seeding, for CLI entry points only (library code owns its generators)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def episode_summary(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean game metrics and mean total reward per role over a step's episodes."""
    sums: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        for k, v in ep.metrics.items():
            sums[f"game/{k}"].append(v)
        for seat, total in ep.rewards.items():
            sums[f"reward/{ep.roles[seat]}"].append(total)
        sums["game/invalid_turn_rate"].append(sum(not t.valid for t in ep.turns) / max(1, len(ep.turns)))
        sums["game/truncated_rate"].append(float(ep.truncated))
    return {k: float(np.mean(v)) for k, v in sums.items()}


class Trainer:
    """Rollouts with the policy table, advantages and an update of the trainable policy, per step."""

    def __init__(self, cfg: ArenaConfig, run_dir: Path, resume: Path | None = None, dist: Dist = SINGLE,
                 parts: TrainerParts | None = None):
        """``parts``: the object graph :func:`~arena.loop.assemble.build_trainer_parts` makes from
        ``cfg`` (built here when not given)."""
        from arena.loop.assemble import build_trainer_parts, open_loggers

        p = parts if parts is not None else build_trainer_parts(cfg, run_dir, resume, dist)
        self.cfg, self.run_dir, self.dist = cfg, run_dir, dist
        self.step = 0
        self.game_cls = cfg.game.cls
        self.pipeline: Any = None  # train.async's rollout thread, while run() runs
        self._inflight: dict[int, Any] = {}  # in-flight steps put back by --resume
        self.policies, self.trained, self.staleness, self.schedule = p.policies, p.trained, p.staleness, p.schedule
        first = self.trained[0]  # the config's first trainable policy (the only one, in most runs)
        self.generator, self.tokenizer, self.learner = first.generator, first.tokenizer, first.learner
        self.estimator_states = first.estimator_states
        self.probe_env, self.state, self.runner, self.league = p.probe_env, p.state, p.runner, p.league
        self.warm, self.evals, self.episode_log = p.warm, p.evals, p.episode_log
        self.metrics_path = run_dir / "metrics.jsonl"
        follower = find_follower(cfg, self.runner.policies)
        self.responders = (Responders(cfg, follower, self.probe_env, self.runner.policies, self.runner.sampling)
                           if follower is not None else None)
        self.descent = (Descent(cfg, self.probe_env, self.runner.policies, self.runner.sampling)
                        if cfg.train.exact_descent else None)
        if resume is not None:
            try:
                checkpoint = find_checkpoint(resume)
            except FileNotFoundError as e:  # killed before its first checkpoint: nothing to continue
                raise ConfigError(f"--resume: {e}; start the run again without --resume") from None
            self._restore(checkpoint)
        elif self.metrics_path.exists() and dist.main:
            self.metrics_path.unlink()
        self.loggers = open_loggers(cfg, run_dir, dist)  # writes config.json; trackers on rank 0 only
        self.last_step = cfg.train.steps

    # -------------------------------------------------------------- the loop
    def run(self, max_steps: int | None = None) -> list[dict[str, float]]:
        last = self.last_step = self.cfg.train.steps if max_steps is None else min(self.cfg.train.steps, max_steps)
        rows = []
        if self.warm is not None and self.step == 0:
            self.warm.run(self)
        watch = self._stop_watch()
        stopped = None
        if self.step == 0 and self.evals is not None:  # the untrained model, on the games every evaluation plays
            row0 = self.evals.run(0, last, self.policies, self.state)
            if row0:
                self._log({"step": 0, **row0}, [])
            stopped = self._stop(watch, row0)
        bar = None
        if self.cfg.runner.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=last, initial=self.step, desc="train", unit="step")
        shown = [f"game/{k}" for k in self.game_cls.headline_metrics] + ["kl"]
        if self.cfg.train.async_ is not None:  # the games of later steps, played in a thread (arena/loop/rollouts.py)
            from arena.loop.rollouts import Pipeline

            self.pipeline = Pipeline(self.play_step, self.staleness, self.step, self.cfg.train.steps, self._inflight)
            self._inflight = {}
        try:
            while self.step < last and stopped is None:
                row = self.train_step()
                stopped = self._stop(watch, row)
                rows.append(row)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix({k.split("/")[-1]: f"{row[k]:.3f}" for k in shown if isinstance(row.get(k), float)})
                if self.step % self.cfg.train.checkpoint_every == 0 or self.step == last or stopped is not None:
                    self.save()
        finally:  # a stopped run's trackers keep what was logged
            if self.pipeline is not None:
                self.pipeline.close()
                self.pipeline = None
            if bar is not None:
                bar.close()
            self.loggers.close()
        return rows

    def _stop_watch(self) -> Any:
        """``train.stop_when``'s watch (arena/loop/stop.py), with a resumed run's logged values; None when unset."""
        if not self.cfg.train.stop_when:
            return None
        from arena.loop.stop import StopWatch

        if self.dist.main:
            (self.run_dir / "stopped.json").unlink(missing_ok=True)
        return StopWatch(self.cfg.train.stop_when, self.metrics_path if self.step > 0 else None)

    def _stop(self, watch: Any, row: dict[str, Any]) -> Any:
        """After a logged row: the stop rule that fires, if any (rank 0 decides for every rank); says why."""
        if watch is None:
            return None
        stop = watch.update(row) if self.dist.main else None
        if self.dist.active:
            stop = gather(self.dist, stop)[0]
        if stop is not None and self.dist.main:
            print(watch.record(stop, self.step, self.run_dir), flush=True)
        return stop

    def specs(self, step: int) -> list[EpisodeSpec]:
        """The games of ``step``: seeds ``seed * 1_000_003 + step * n + i``, disjoint across steps."""
        n = self.cfg.train.games_per_step
        return [EpisodeSpec(seed=self.cfg.train.seed * 1_000_003 + step * n + i) for i in range(n)]

    def play_step(self, step: int) -> tuple[list[Episode], dict[str, float]]:
        """The games of ``step`` with the generator as it is, and the rollout's figures (this rank's)."""
        generators = list({id(u.generator): u.generator for u in self.trained}.values())
        tokens_before = sum(getattr(g, "tokens_generated", 0) for g in generators)
        responded = self.responders.before_step(step) if self.responders is not None else {}
        t0 = time.perf_counter()
        specs = self.league.assign(step, self.specs(step)) if self.league else self.specs(step)
        episodes = self.runner.play(self.dist.block(specs))
        self._tokenize_probes(episodes)
        tokens = float(sum(getattr(g, "tokens_generated", 0) for g in generators) - tokens_before)
        return episodes, {"gen/tokens": tokens, "time/play_s": time.perf_counter() - t0, **responded}

    def train_step(self) -> dict[str, float]:
        cfg = self.cfg
        step = self.step + 1
        progress = Progress(step=step, total=cfg.train.steps)
        phases = self.schedule.phases(progress)
        t0 = time.perf_counter()
        pipeline = self.pipeline
        if self.descent is not None:  # the whole tree, no game (arena/loop/descent.py)
            descended, descent_stats = self.descent.samples(step)
            episodes, played = [], {"gen/tokens": 0.0, "time/play_s": 0.0, **descent_stats}
        else:
            episodes, played = pipeline.take(step) if pipeline is not None else self.play_step(step)
        if self.dist.active:  # every rank sees the whole step; each trains its own episodes' samples
            mine = {ep.episode_id for ep in episodes}
            episodes = [ep for part in gather(self.dist, episodes) for ep in part]
        t1 = time.perf_counter()
        stats: dict[str, dict[str, float]] = {}  # per trainable policy: its samples', update's and canary's figures
        befores = []
        for unit in self.trained:  # each policy learns from its own seats' turns only
            if self.descent is not None:
                samples, sample_stats = descended, {}
            else:
                samples, sample_stats = build_samples(episodes, phases, unit.learner.cfg, unit.estimator_states, unit.name)
            # No sample, weights unchanged: the generator already holds them, nothing to push or check.
            befores.append(self.canary_before(episodes, unit) if samples or unit.pushed != unit.learner.version else None)
            if self.dist.active:
                learn_stats = unit.learner.step(samples, progress, local=self._local_samples(episodes, samples, mine))
            else:
                learn_stats = unit.learner.step(samples, progress)
            if self.episode_log is not None and unit is self.trained[0]:
                self.episode_log.write(step, episodes, samples)
            if not samples:
                print(f"step {step}: {no_samples_message(episodes, phases, unit.name)}", file=sys.stderr)
            stats[unit.name] = {**sample_stats, **learn_stats, **unit.estimator_states.metrics()}
        t_update = time.perf_counter()
        if pipeline is not None:  # the last step the old weights play must be played first
            pipeline.before_sync(step)
        with pipeline.lock if pipeline is not None else contextlib.nullcontext():
            self.sync_weights()
            for unit, before in zip(self.trained, befores, strict=True):
                stats[unit.name].update(self.sync_canary(before, unit))
            t2 = time.perf_counter()
            summary = episode_summary(episodes)
            summary.update({f"game/{k}": v for k, v in self.probe_env.step_metrics(episodes).items()})
            self.schedule.update({k.removeprefix("game/"): v for k, v in summary.items() if k.startswith("game/")})
            generators = {name: partial(generate_texts, policy) for name, policy in self.policies.items()}
            state_stats = self.state.update(episodes, generators) if self.state is not None else {}
            self.step = step
            evals = self.evals.run(step, self.last_step, self.policies, self.state) if self.evals is not None else {}
            if pipeline is not None:
                pipeline.synced(step)
        tokens = played["gen/tokens"]
        if self.dist.active:  # every rank's tokens (the gather made t1 the slowest rank's end of rollout)
            tokens = sum_values(self.dist, {"tokens": float(tokens)})["tokens"]
        row: dict[str, Any] = {"step": step, "stage": "+".join(phases)}
        row.update(summary)
        several = len(self.trained) > 1  # then each policy's figures carry its name: "<policy>/kl"
        for name, figures in stats.items():
            row.update({f"{name}/{k}" if several else k: v for k, v in figures.items()})
        row.update({f"state/{k}": v for k, v in state_stats.items()})
        row.update(self.league.after_step(step, episodes) if self.league else {})
        row.update({
            "time/rollout_s": t1 - t0, "time/update_s": t2 - t1, "time/step_s": t2 - t0,
            "gen/tokens": float(tokens), "gen/tokens_per_s": tokens / max(played["time/play_s"], 1e-9),
        })
        row.update({k: v for k, v in played.items() if k == "time/respond_s" or k.startswith(("descent/", "time/descent"))})
        if pipeline is not None:  # rollout_s is the wait for the thread's games; play_s their own time
            row.update({"async/staleness": pipeline.staleness(step), "time/play_s": played["time/play_s"],
                        "time/sync_wait_s": t2 - t_update})
        row.update(evals)  # after the weight sync and the state update; outside the step's timing
        self._log(row, episodes)
        for unit in self.trained:  # logged first, so metrics.jsonl shows the gap that stopped the run
            if "sync/canary_gap" in stats[unit.name]:
                check_gap(stats[unit.name]["sync/canary_gap"], unit.canary_max_gap, step,
                          f"policies.{unit.name}: " if several else "")
        return row

    def _local_samples(self, episodes: Sequence[Episode], samples: Sequence[Sample], mine: set[str]) -> list[int]:
        """Indices of the samples of this rank's episodes (matched to their turns as the episode
        viewer does; two identical turns may swap owners, which changes no gradient)."""
        from arena.view.record import match_samples

        group_by = {phase: list(est.group_by) for phase, est in self.cfg.learner.estimators.items()}
        owner = {id(s): eid for (eid, _), s in match_samples(episodes, samples, self.cfg.trainable, group_by).items()}
        return [i for i, s in enumerate(samples)
                if (owner[id(s)] in mine if id(s) in owner else i % self.dist.world == self.dist.rank)]

    def _tokenize_probes(self, episodes: Sequence[Episode]) -> None:
        """Token ids of the probe prompts games attached to trainable turns (for objective terms)."""
        from arena.policies.base import chat_prompt_ids

        tokenizers = {unit.name: unit.tokenizer for unit in self.trained}
        for ep in episodes:
            for turn in ep.turns:
                if turn.probes and turn.policy in tokenizers:
                    tokenizer = tokenizers[turn.policy]
                    turn.probe_ids = {k: chat_prompt_ids(tokenizer, m) for k, m in turn.probes.items()}

    def sync_weights(self, force: bool = False) -> None:
        """Push each trainable policy's weights into its generator (:func:`push_weights`). ``force``: push
        even when the generator holds the learner's version (weights were loaded from a checkpoint)."""
        for unit in self.trained:
            push_weights(unit, force)

    def canary_before(self, episodes: Sequence[Episode], unit: Trained) -> tuple[list[Sample], list[list[float]]] | None:
        """Before the update: the canary's turns of the step (of ``unit``'s policy) and its
        learner's logprobs of them, its weights rounded to the generator's dtype (arena/loop/canary.py);
        ``None`` when the canary is off."""
        if unit.canary_max_gap is None or shares_model(unit.generator, unit.learner.module):
            return None  # off, or nothing is synced: the generator runs on the learner's own model
        picked = canary_samples(episodes, unit.name, self.cfg.train.sync_canary_samples)
        return (picked, unit.learner.score(picked, 1.0, unit.generator_dtype)) if picked else None

    def sync_canary(self, before: tuple[list[Sample], list[list[float]]] | None, unit: Trained) -> dict[str, float]:
        """After the sync, the generator and the learner score the same turns (arena/loop/canary.py)."""
        if before is None:
            return {}
        picked, old = before
        after = unit.learner.score(picked, 1.0, unit.generator_dtype)
        return canary_stats(generator_logprobs(unit.generator, picked), after, old)

    # -------------------------------------------------------------- logging
    def _log(self, row: dict[str, Any], episodes: Sequence[Episode]) -> None:
        if not self.dist.main:
            return
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}) + "\n")
        if self.cfg.runner.episodes_jsonl:
            write_jsonl(episodes, self.run_dir / self.cfg.runner.episodes_jsonl)
        self.loggers.log(row)

    # -------------------------------------------------------------- checkpoints
    def save(self) -> Path | None:
        """Write the step's checkpoint (rank 0; the other ranks hand it their own state and wait)."""
        state = {"estimators": self.estimator_states.state_dict(), "schedule": self.schedule.state_dict()}
        if self.evals is not None and any(self.evals.past.values()):
            state["evals"] = self.evals.state_dict()
        if self.warm is not None:
            state["warm_start"] = self.warm.state_dict()
        extra: dict[str, Any] = {"game_state": self.state.save} if self.state is not None else {}
        if self.pipeline is not None and self.staleness:  # played, not yet trained: steps step+1 .. step+k
            from arena.loop.rollouts import save_inflight

            extra["inflight"] = partial(save_inflight, inflight=self.pipeline.inflight(self.step))
        optimizer = self.learner.state_dict()
        if self.dist.active:  # each rank's RNG in ranks/rank_R.pt; a ZeRO optimizer saves every rank's partition
            parts = gather_to_main(self.dist, {"rng": rng_state(), **(optimizer if self.learner.partitioned else {})})
            if not self.dist.main:
                barrier(self.dist)
                return None
            ranks = parts or []
            if self.learner.partitioned:
                optimizer = {"optimizer": [r.pop("optimizer") for r in ranks]}
            extra["ranks"] = lambda folder: [torch.save(r, folder / f"rank_{i}.pt") for i, r in enumerate(ranks) if i]
        if self.league is not None and self.step > 0:  # the checkpoint's weights join the pool (not the warm start's)
            for unit in self.trained:  # each trainable policy's weights join its own pool
                self.league.add_member(self.step, unit.learner.module, unit.tokenizer, unit.name)
            extra["league"] = self.league.save
        if self.responders is not None:
            extra["responders"] = self.responders.save
        if len(self.trained) > 1:  # the first policy is the checkpoint's model/; the others in policies/<name>/
            extra["policies"] = partial(save_policies, self.trained[1:])
        path = save_checkpoint(
            self.run_dir, self.step, self.learner.module, self.tokenizer, optimizer, state,
            keep=self.cfg.train.keep_checkpoints, extra=extra or None,
        )
        if self.league is not None:
            self.league.prune(list_checkpoints(self.run_dir))
        barrier(self.dist)
        return path

    def _restore(self, checkpoint: Path) -> None:
        state, optimizer, rng = load_state(checkpoint)
        own = checkpoint / "ranks" / f"rank_{self.dist.rank}.pt"
        if self.dist.rank and own.is_file():  # rank R's own RNG; else (another world size) rank 0's
            rng = torch.load(own, weights_only=False)["rng"]
        restore_weights(self.learner.module, checkpoint / "model")
        self.learner.load_state_dict(optimizer)
        self.estimator_states.load_state_dict(state["estimators"])
        load_policies(self.trained[1:], checkpoint)
        self.schedule.load_state_dict(state["schedule"])
        if self.evals is not None:
            self.evals.load_state_dict(state.get("evals"))
        if self.warm is not None:
            self.warm.load_state_dict(state.get("warm_start"))
        if self.state is not None:
            self.state.load(checkpoint / "game_state")
        if self.league is not None and (checkpoint / "league").is_dir():
            self.league.load(checkpoint / "league")
        if self.responders is not None:
            self.responders.load(checkpoint)
        if self.staleness:  # the steps in flight at the checkpoint, played by their own (older) weights
            from arena.loop.rollouts import load_inflight

            self._inflight = load_inflight(checkpoint / "inflight")
            want = min(self.staleness, self.cfg.train.steps - int(state["step"]))
            if len(self._inflight) != want:
                raise ConfigError(f"train.async.max_staleness: the checkpoint holds {len(self._inflight)} step(s) in flight, "
                                  f"max_staleness {self.staleness} needs {want}; resume with the run's own max_staleness")
        set_rng_state(rng)
        self.step = int(state["step"])
        self.sync_weights(force=True)
        if self.metrics_path.exists() and self.dist.main:  # drop rows written after the checkpoint
            kept = [line for line in self.metrics_path.read_text().splitlines() if line and _row_step(line) <= self.step]
            self.metrics_path.write_text("".join(line + "\n" for line in kept))


def no_samples_message(episodes: Sequence[Episode], phases: Sequence[str], trainable: str) -> str:
    """Why a step trained nothing, and what to try. When most of the trainable policy's replies were
    invalid, the model does not yet write the game's format: a warm start is the usual fix."""
    turns = [t for ep in episodes for t in ep.turns if t.policy == trainable]
    invalid = sum(not t.valid for t in turns) / len(turns) if turns else 0.0
    why = (f"trained 0 samples (phases {'+'.join(phases)}: no trainable turn with a learning signal; "
           f"{invalid:.0%} of the trainable policy's {len(turns)} replies were invalid)")
    if turns and invalid >= 0.5:
        return (why + "; the model does not yet write the game's format: add train.warm_start (supervised "
                "demonstrations from a bot before self-play, docs/guides/warm-start.md), or loosen the game's parser")
    return why + "; check seats, learner.estimators and drop_zero_variance"


def _row_step(line: str) -> float:
    """The step of a metrics.jsonl line; a line cut short (a kill or a full disk mid-write) counts as after any step."""
    try:
        return float(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return math.inf


