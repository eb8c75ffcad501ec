"""What a training step reports, beside the kernel: the row's game summary, the message of a step
that trained nothing, the timing keys, global seeding for the CLIs, and the rank's own samples."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.core.types import Episode, Sample

TIMING_KEYS = ("time/rollout_s", "time/update_s", "time/step_s", "gen/tokens_per_s", "time/eval_s", "time/respond_s",
               "time/descent_s")


def seed_everything(seed: int) -> None:
    """Global seeding, for CLI entry points only (library code owns its generators)."""
    import torch

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


def row_step(line: str) -> float:
    """The step of a metrics.jsonl line; a line cut short (a kill or a full disk mid-write) counts as after any step."""
    try:
        return float(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return math.inf


def local_samples(cfg: Any, dist: Any, episodes: Sequence[Episode], samples: Sequence[Sample], mine: set[str]) -> list[int]:
    """Indices of the samples of this rank's episodes (matched to their turns as the episode viewer does;
    two identical turns may swap owners, which changes no gradient)."""
    from arena.view.record import match_samples

    group_by = {phase: list(est.group_by) for phase, est in cfg.learner.estimators.items()}
    owner = {id(s): eid for (eid, _), s in match_samples(episodes, samples, cfg.trainable, group_by).items()}
    return [i for i, s in enumerate(samples) if (owner[id(s)] in mine if id(s) in owner else i % dist.world == dist.rank)]


def tokenize_probes(trained: Sequence[Any], episodes: Sequence[Episode]) -> None:
    """Token ids of the probe prompts games attached to trainable turns (for objective terms)."""
    from arena.policies.base import chat_prompt_ids

    tokenizers = {unit.name: unit.tokenizer for unit in trained}
    for ep in episodes:
        for turn in ep.turns:
            if turn.probes and turn.policy in tokenizers:
                tokenizer = tokenizers[turn.policy]
                turn.probe_ids = {k: chat_prompt_ids(tokenizer, m) for k, m in turn.probes.items()}
