"""What training saves for the viewer: each step's episodes with the learner's advantages.

One gzip JSONL file per step, ``<run_dir>/episodes/step_000012.jsonl.gz``, one
episode per line: the :class:`~arena.core.types.Episode` JSON with, on each turn,

* ``prompt_ids``, ``completion_ids``, ``probe_ids`` and ``probes`` dropped (token
  ids mean nothing to a reader and are the bulk of an episode);
* ``tokens``: the completion's tokens decoded one by one (for colouring);
* ``logprobs`` rounded to 3 decimals;
* ``advantage``: the advantage the learner trained the turn with, ``None`` for a
  turn it did not train (another policy's, an untrained phase, a dropped group);
* ``token_weights``: the per-token weights the learner applied to the turn, if any: the
  advantage multipliers (``Sample.token_weights``) times AUSO's action weight
  ``auso_weight`` when the turn has one (the viewer's "AUSO action weight" colours);
* ``auso_jsd``, ``auso_weight`` (AUSO, rounded to 4 decimals; absent otherwise): the action's
  JSD and weight as the learner set them in ``Sample.extras`` (``arena/learners/auso.py``:
  internalising, the JSD to the teacher probe and the distillation weight; utilising, the
  skill sensitivity ``I_t`` and ``w_t``).

Chat prompts repeat from turn to turn, which gzip folds away. Saving stops, with
one note, once the folder holds ``train.episodes.max_mb``; a replayed step
(resume) overwrites its file, and a new run in the same folder deletes the old
run's files first.

Samples are matched to their turns by walking each phase's trainable turns in
the order :func:`arena.learners.samples.build_samples` made them: samples of a phase
are a subsequence of those turns, so the first turn on from the last match with
the same prompt, completion and group is the sample's turn.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from arena.core.types import Episode, Sample, Turn

EPISODES_DIR = "episodes"
DROPPED = ("prompt_ids", "completion_ids", "probe_ids", "probes")
TURN_EXTRAS = ("auso_jsd", "auso_weight")  # Sample.extras the learner sets, saved on the turn


def step_file(run_dir: Path, step: int) -> Path:
    return run_dir / EPISODES_DIR / f"step_{step:06d}.jsonl.gz"


def match_samples(
    episodes: Sequence[Episode], samples: Sequence[Sample], policy: str, group_by: dict[str, list[str]] | None = None
) -> dict[tuple[str, int], Sample]:
    """``(episode_id, turn index) -> sample`` for every sample (see the module docstring);
    ``group_by``: each phase's estimator keys, which made the sample's ``extras['group']``."""
    group_by = group_by or {}
    by_phase: dict[str, list[tuple[str, Turn]]] = {}
    cursor: dict[str, int] = {}
    found: dict[tuple[str, int], Sample] = {}
    for s in samples:
        if s.phase not in by_phase:
            by_phase[s.phase] = [
                (ep.episode_id, t) for ep in episodes for t in ep.turns_of(phase=s.phase)
                if t.policy == policy and t.completion_ids
            ]
            cursor[s.phase] = 0
        turns, i = by_phase[s.phase], cursor[s.phase]
        keys = group_by.get(s.phase)
        while i < len(turns):
            eid, t = turns[i]
            i += 1
            same_group = keys is None or s.extras.get("group") == "|".join(t.group.get(k, "") for k in keys)
            if t.completion_ids == s.completion_ids and t.prompt_ids == s.prompt_ids and same_group:
                found[(eid, t.index)] = s
                break
        cursor[s.phase] = i
    return found


def compact_episode(ep: Episode, samples: dict[tuple[str, int], Sample], decode: Any = None) -> dict[str, Any]:
    """The episode as saved: see the module docstring (``decode``: token id list -> strings)."""
    out = ep.model_dump(mode="json")
    for raw, turn in zip(out["turns"], ep.turns, strict=True):
        for key in DROPPED:
            raw.pop(key, None)
        raw["logprobs"] = [round(x, 3) for x in turn.logprobs]
        raw["tokens"] = decode(turn.completion_ids) if decode is not None and turn.completion_ids else []
        s = samples.get((ep.episode_id, turn.index))
        raw["advantage"] = None if s is None else round(s.advantage, 4)
        raw["token_weights"] = None if s is None else token_weights(s)
        for key in TURN_EXTRAS:
            if s is not None and isinstance(s.extras.get(key), int | float):
                raw[key] = round(float(s.extras[key]), 4)
    return out


def token_weights(s: Sample) -> list[float] | None:
    """The sample's per-token weights (rounded to 3 decimals) times its ``auso_weight``; None if neither."""
    action = s.extras.get("auso_weight")
    if s.token_weights is None and not isinstance(action, int | float):
        return None
    base = s.token_weights if s.token_weights is not None else [1.0] * len(s.completion_ids)
    scale = float(action) if isinstance(action, int | float) else 1.0
    return [round(w * scale, 3) for w in base]


class EpisodeLog:
    """Writes a step's episodes for the viewer, within a disk cap."""

    def __init__(
        self, run_dir: Path, max_mb: float, tokenizer: Any = None, policy: str = "",
        group_by: dict[str, list[str]] | None = None, fresh: bool = True,
    ):
        self.dir = run_dir / EPISODES_DIR
        self.group_by = group_by
        if fresh and self.dir.exists():  # a new run in an old folder: drop the old run's episodes
            for old in self.dir.glob("step_*.jsonl.gz"):
                old.unlink()
        self.max_bytes = int(max_mb * 1024 * 1024)
        self.tokenizer = tokenizer
        self.policy = policy
        self.full = False

    def _decode(self, ids: list[int]) -> list[str]:
        return list(self.tokenizer.batch_decode([[i] for i in ids]))

    def used_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.dir.glob("*.jsonl.gz")) if self.dir.exists() else 0

    def write(self, step: int, episodes: Sequence[Episode], samples: Sequence[Sample]) -> Path | None:
        """Save step ``step``; returns the file, or None once the cap is reached."""
        if self.full:
            return None
        path = step_file(self.dir.parent, step)
        if self.used_bytes() - (path.stat().st_size if path.exists() else 0) >= self.max_bytes:
            self.full = True
            print(f"note: {self.dir} holds {self.max_bytes / 2**20:.0f} MB (train.episodes.max_mb); "
                  f"episodes from step {step} on are not saved", file=sys.stderr)
            return None
        matched = match_samples(episodes, samples, self.policy, self.group_by)
        decode = self._decode if self.tokenizer is not None else None
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
            for ep in episodes:
                f.write(json.dumps(compact_episode(ep, matched, decode), separators=(",", ":")) + "\n")
        tmp.replace(path)
        return path


def read_step_file(path: Path) -> Iterator[dict[str, Any]]:
    """The saved episodes of one step file, as dicts (plain or gzip JSONL)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
