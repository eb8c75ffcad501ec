"""SpyRL is unchanged by the core refactor (slow: the built-in model).

``tests/golden/spy_2steps.json`` was recorded BEFORE the refactor, with the code
of commit 04a36d7 (``games/spy.yaml``, old config keys)::

    python -m arena.train games/spy.yaml --set game.n_players=4 --set game.task=math \\
      --set policy.max_new_tokens=16 --set policy.dtype=float32 --set learner.autocast_bf16=false \\
      --set runner.num_envs=4 --set runner.progress=false \\
      --set train.games_per_step=4 --set train.steps=2 --set train.checkpoint_every=2 \\
      --set train.plot=false --set learner.lr=1e-4 --set train.schedule.mode=fixed \\
      --set runner.episodes_jsonl=episodes.jsonl --set train.seed=7

(float32 throughout, so the check means the same on every CPU), keeping every non-timing metric and each turn's seat, role, phase, completion,
token ids, parsed action, validity and reward. The same run with today's config
keys must give the same episodes and every recorded metric within 1e-6. Step 1
trains the votes (GRPO), step 2 the performing turns (RAE), so both estimators
and the schedule are covered.

Re-recorded (same command, today's config keys) when the transformers backend moved to
one sampling generator per request (``HFPolicy(per_request_rng=True)``): every sampled
completion changed with it, by design. Before that change this run still matched the
pre-refactor recording above.

Re-recorded again when SpyRL became ``spy_v1``: an episode id starts with the game's
versioned name and every request's sampling seed hashes the episode id
(``arena.runner.request_seed``), so the rename alone changes every sampled completion.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from arena.core.types import read_jsonl
from tolerance import approx32, scale_of

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "spy_2steps.json"
SETS = [
    "game.n_players=4", "game.task=math", "policies.learner.sampling.max_new_tokens=16", "policies.learner.backend=hf",
    "policies.learner.dtype=float32", "learner.autocast_bf16=false", "learner.param_dtype=float32", "runner.num_envs=4",
    "runner.progress=false", "train.games_per_step=4", "train.steps=2", "train.checkpoint_every=2", "train.plot=false",
    "learner.lr=1e-4", "runner.episodes_jsonl=episodes.jsonl", "train.seed=7",
]
TURN_FIELDS = ("seat", "role", "phase", "completion", "completion_ids", "action", "valid", "reward")
TIMING = ("time/rollout_s", "time/update_s", "time/step_s", "gen/tokens_per_s")
#: How the samples were cut into micro-batches: bookkeeping, not the update. Prefix-aware packing (issue #35,
#: arena/learners/prefix.py) packs rows that open alike together, so the count changed (2 -> 1 at step 1);
#: micro-batched equals full-batch, and every loss, KL and statistic below is still held to 1e-6.
PACKING = ("micro_batches",)


def summarise(run: Path) -> dict:
    """What the golden file keeps of a run folder."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    episodes = [[{k: getattr(t, k) for k in TURN_FIELDS} for t in ep.turns] for ep in read_jsonl(run / "episodes.jsonl")]
    return {"metrics": [{k: v for k, v in r.items() if k not in TIMING} for r in rows], "episodes": episodes}


@pytest.mark.slow
def test_spy_training_matches_the_pre_refactor_golden_run(tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    run = tmp_path / "run"
    args = [a for s in SETS for a in ("--set", s)]
    proc = subprocess.run(
        [sys.executable, "-m", "arena.train", "games/spy/spy.yaml", *args, "--run-dir", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    now = summarise(run)
    assert now["episodes"] == golden["episodes"], "the same seeds no longer give the same episodes"
    assert len(now["metrics"]) == len(golden["metrics"])
    differ = []
    for want, got in zip(golden["metrics"], now["metrics"], strict=True):
        for key, value in want.items():
            assert key in got, f"metric {key} is gone"
            if key in PACKING:
                continue
            same = got[key] == approx32(value, scale=scale_of(value, 1.0)) if isinstance(value, float) else got[key] == value
            if not same:
                differ.append(f"step {want['step']} {key}: {value} -> {got[key]}")
    assert not differ, differ
