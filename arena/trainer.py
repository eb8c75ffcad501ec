"""The training loop: rollout -> advantages -> update -> weight sync -> metrics -> checkpoint.

Rollouts of step ``s`` use the seeds ``seed * 1_000_003 + s * games_per_step + i``,
and every sampling call is seeded from its requests, so a run resumed from a
checkpoint replays exactly the steps an uninterrupted run would have played.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arena.checkpoint import find_checkpoint, load_state, save_checkpoint, set_rng_state
from arena.config import ArenaConfig, ConfigError
from arena.runner import Runner
from arena.types import Episode, write_jsonl
from learners.advantages import RoleBaselines
from learners.samples import TRAINABLE, build_samples
from learners.schedule import PhaseSchedule
from learners.update import Learner

TIMING_KEYS = ("time/rollout_s", "time/update_s", "time/step_s", "gen/tokens_per_s")


def episode_summary(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean game metrics and mean total reward per role over a step's episodes."""
    sums: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        for k, v in ep.metrics.items():
            sums[f"game/{k}"].append(v)
        for seat, total in ep.rewards.items():
            sums[f"reward/{ep.roles[seat]}"].append(total)
        sums["game/invalid_turn_rate"].append(sum(not t.valid for t in ep.turns) / max(1, len(ep.turns)))
    return {k: float(np.mean(v)) for k, v in sums.items()}


class Trainer:
    def __init__(self, cfg: ArenaConfig, run_dir: Path, resume: Path | None = None):
        if TRAINABLE not in cfg.seats.values():
            raise ConfigError("seats: no seat plays the trainable policy; map at least one pattern to 'trainable'")
        if cfg.policy.backend == "openai":
            raise ConfigError("policy.backend: 'openai' cannot receive weight updates; train with hf or vllm")
        self.cfg = cfg
        self.run_dir = run_dir
        self.step = 0
        seed = cfg.train.seed
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

        from policies.factory import build_policies
        from policies.models import load_causal_lm

        policies, seat_map, sampling = build_policies(cfg)
        self.generator = policies[TRAINABLE]
        if cfg.policy.dtype == "float32" and cfg.policy.backend == "hf":
            model, self.tokenizer = self.generator.model, self.generator.tokenizer  # type: ignore[attr-defined]
        else:
            model, self.tokenizer = load_causal_lm(cfg.policy.model, dtype="float32", device=cfg.learner.device)
        ref = None
        if cfg.learner.beta > 0:
            ref, _ = load_causal_lm(cfg.policy.model, dtype="float32", device=cfg.learner.device)
            ref.requires_grad_(False)
        self.learner = Learner(model, cfg.learner, self.tokenizer.pad_token_id, cfg.policy.temperature, ref)
        self.baselines = RoleBaselines(alpha=cfg.learner.rae.alpha, order=cfg.learner.rae.order)
        self.schedule = PhaseSchedule(cfg.train.schedule)
        self.runner = Runner(cfg.game.make_env, policies, seat_map, sampling, num_envs=cfg.runner.num_envs)
        run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = run_dir / "metrics.jsonl"
        if resume is not None:
            self._restore(find_checkpoint(resume))
        elif self.metrics_path.exists():
            self.metrics_path.unlink()
        game = {"name": cfg.game.name, **cfg.game.settings.model_dump(mode="json", by_alias=True)}
        resolved = cfg.model_dump(mode="json", exclude={"game"}) | {"game": game}
        (run_dir / "config.json").write_text(json.dumps(resolved, indent=2))  # the run's full, resolved config
        self._tb = None

    # -------------------------------------------------------------- the loop
    def run(self, max_steps: int | None = None) -> list[dict[str, float]]:
        last = self.cfg.train.steps if max_steps is None else min(self.cfg.train.steps, max_steps)
        rows = []
        bar = None
        if self.cfg.runner.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=last, initial=self.step, desc="train", unit="step")
        while self.step < last:
            row = self.train_step()
            rows.append(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix({k.split("/")[-1]: f"{row[k]:.3f}" for k in ("game/detection_accuracy", "game/parseable_vote_rate", "kl") if k in row})
            if self.step % self.cfg.train.checkpoint_every == 0 or self.step == last:
                self.save()
        if bar is not None:
            bar.close()
        if self._tb is not None:
            self._tb.close()
        return rows

    def train_step(self) -> dict[str, float]:
        cfg = self.cfg
        step = self.step + 1
        phases = self.schedule.phases()
        n = cfg.train.games_per_step
        seeds = [cfg.train.seed * 1_000_003 + step * n + i for i in range(n)]
        tokens_before = getattr(self.generator, "tokens_generated", 0)
        t0 = time.perf_counter()
        episodes = self.runner.play(seeds)
        t1 = time.perf_counter()
        samples, sample_stats = build_samples(episodes, phases, cfg.learner, self.baselines)
        learn_stats = self.learner.step(samples)
        self.sync_weights()
        t2 = time.perf_counter()
        summary = episode_summary(episodes)
        self.schedule.update({k.removeprefix("game/"): v for k, v in summary.items() if k.startswith("game/")})
        self.step = step
        tokens = getattr(self.generator, "tokens_generated", 0) - tokens_before
        row: dict[str, Any] = {"step": step, "stage": "+".join(phases)}
        row.update(summary)
        row.update(sample_stats)
        row.update(learn_stats)
        row.update({f"rae/{k}": v for k, v in self.baselines.values.items()})
        row.update({
            "time/rollout_s": t1 - t0, "time/update_s": t2 - t1, "time/step_s": t2 - t0,
            "gen/tokens": float(tokens), "gen/tokens_per_s": tokens / max(t1 - t0, 1e-9),
        })
        self._log(row, episodes)
        return row

    def sync_weights(self) -> None:
        """Push the learner's weights into the generator (no-op when they share the model)."""
        gen_model = getattr(self.generator, "model", None)
        learner_model = self.learner.module
        if gen_model is learner_model:
            return
        if self.learner.engine is not None:
            from learners.ds import gathered_state_dict

            state = gathered_state_dict(self.learner.engine)
        else:
            state = learner_model.state_dict()
        if hasattr(self.generator, "load_weights"):  # vLLM: push into the running engine
            self.generator.load_weights(state.items())
            return
        with torch.no_grad():
            gen_model.load_state_dict(state)

    # -------------------------------------------------------------- logging
    def _log(self, row: dict[str, Any], episodes: Sequence[Episode]) -> None:
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}) + "\n")
        if self.cfg.runner.episodes_jsonl:
            write_jsonl(episodes, self.run_dir / self.cfg.runner.episodes_jsonl)
        if self._tb is None:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.run_dir / "tensorboard"))
        for k, v in row.items():
            if isinstance(v, float) and math.isfinite(v):
                self._tb.add_scalar(k, v, row["step"])
        self._tb.flush()

    # -------------------------------------------------------------- checkpoints
    def save(self) -> Path:
        state = {
            "baselines": self.baselines.state_dict(),
            "schedule": self.schedule.state_dict(),
        }
        return save_checkpoint(
            self.run_dir, self.step, self.learner.module, self.tokenizer, self.learner.state_dict(), state,
            keep=self.cfg.train.keep_checkpoints,
        )

    def _restore(self, checkpoint: Path) -> None:
        from transformers import AutoModelForCausalLM

        state, optimizer, rng = load_state(checkpoint)
        saved = AutoModelForCausalLM.from_pretrained(checkpoint / "model", dtype=torch.float32)
        with torch.no_grad():
            self.learner.module.load_state_dict(saved.state_dict())
        self.learner.load_state_dict(optimizer)
        self.baselines.load_state_dict(state["baselines"])
        self.schedule.load_state_dict(state["schedule"])
        set_rng_state(rng)
        self.step = int(state["step"])
        self.sync_weights()
        if self.metrics_path.exists():  # drop rows written after the checkpoint
            kept = [line for line in self.metrics_path.read_text().splitlines() if line and json.loads(line)["step"] <= self.step]
            self.metrics_path.write_text("".join(line + "\n" for line in kept))
