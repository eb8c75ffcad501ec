"""The weight-sync canary (arena/loop/components/canary.py): a stale sync stops the run with one line; a correct one passes.

The end-to-end runs train examples/sealed_bid.py with the tiny randomly initialised model
of tests/test_league.py given a digit-writing head (tests/forked_runs.py: valid bids,
rewards with variance, real updates). The generator runs on device ``cpu:0`` and the
learner on ``cpu``: two float32 copies that the trainer really syncs, as a generator on
``cuda:1`` and a learner on ``cuda:0`` would be (a float32 hf generator on the learner's
own device IS the learner's model: nothing to sync, nothing to check). So the bound is
the real default, ``auto`` = 1e-3 for float32. The stale sync is planted in a real
``arena.train`` process by making ``Trainer.sync_weights`` a no-op.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from arena.core.errors import ConfigError, RunStopped
from arena.core.types import Episode, Turn
from arena.loop.components.canary import FLOAT32_MAX_GAP, HALF_MAX_GAP, StaleWeights, auto_max_gap, canary_samples, check_gap
from arena.loop.config import load_config
from forked_runs import digit_model
from test_league import tiny_model  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    "policies.learner.sampling.max_new_tokens=4", "policies.learner.device=cpu:0", "game.max_bid=10000",
    "train.games_per_step=2", "train.steps=2", "train.checkpoint_every=2", "train.plot=false", "learner.lr=1e-3",
    "train.episodes.save=false",
]
MAX_GAP = FLOAT32_MAX_GAP  # train.canary.max_gap: auto, for a float32 generator


def test_check_gap_stops_above_the_bound_with_one_line() -> None:
    check_gap(0.01, 0.02, step=3)
    check_gap(5.0, None, step=3)  # null: off
    with pytest.raises(StaleWeights) as err:
        check_gap(0.0201, 0.02, step=3)
    line = str(err.value)
    assert "\n" not in line and "0.0201" in line and "0.02" in line and "step-3" in line and "stale" in line
    assert isinstance(err.value, RunStopped)
    with pytest.raises(StaleWeights):  # NaN logprobs (broken weights) are not a pass
        check_gap(math.nan, 0.02, step=1)


def test_auto_bound_follows_the_generator_dtype_and_the_config_checks_it() -> None:
    assert auto_max_gap("float32") == FLOAT32_MAX_GAP < auto_max_gap("bfloat16") == auto_max_gap("float16") == HALF_MAX_GAP
    assert load_config(ROOT / "arena/games/spy/spy.yaml").train.canary.max_gap == "auto"
    assert load_config(ROOT / "arena/games/spy/spy.yaml", ["train.canary.max_gap=null"]).train.canary.max_gap is None
    with pytest.raises(ConfigError, match=r"train.canary.max_gap: must be a positive number .* \(got 0\)"):
        load_config(ROOT / "arena/games/spy/spy.yaml", ["train.canary.max_gap=0"])


def test_canary_takes_the_shortest_completions_of_the_trainable_policy() -> None:
    def turn(i: int, policy: str, ids: list[int], prompt: int = 2) -> Turn:
        return Turn(index=i, seat=f"s{i}", role="r", phase="p", messages=[], completion="x", policy=policy,
                    prompt_ids=list(range(prompt)), completion_ids=ids)

    eps = [Episode(episode_id="a", game="g", turns=[turn(0, "frozen", [5]), turn(1, "learner", []), turn(2, "learner", [7])]),
           Episode(episode_id="b", game="g", turns=[turn(0, "learner", [8, 9]), turn(1, "learner", [10], prompt=9),
                                                    turn(2, "learner", [11])])]
    assert [s.completion_ids for s in canary_samples(eps, "learner", 2)] == [[7], [11]]  # 3 tokens each; ties: first
    assert [s.completion_ids for s in canary_samples(eps, "learner", 3)] == [[7], [8, 9], [11]]  # in episode order
    assert [s.completion_ids for s in canary_samples(eps, "learner", 9)] == [[7], [8, 9], [10], [11]]


@pytest.fixture(scope="module")
def digits(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return digit_model(tiny_model, tmp_path_factory.mktemp("digits") / "model")


def _argv(model: Path, run: Path) -> list[str]:
    sets = [a for item in [f"policies.learner.model={model}", *SETS] for a in ("--set", item)]
    return ["examples/sealed_bid.yaml", *sets, "--run-dir", str(run)]


def _gaps(run: Path, synced: bool = True) -> list[float]:
    """The canary's gap of every step that pushed weights: the first step, and each later one that trained
    (a step with no sample changes no weight, so it neither pushes nor runs the canary, and logs no gap).
    ``synced`` False: the push is disabled, so the generator never holds the learner's weights and every
    step runs the canary."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(("sync/canary_gap" in r) == (r["samples"] > 0 or r["step"] == 1 or not synced) for r in rows), rows
    return [r["sync/canary_gap"] for r in rows if "sync/canary_gap" in r]


def _last_step(run: Path) -> int:
    return json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"]


def test_a_stale_sync_stops_the_run_and_a_correct_one_passes(digits: Path, tmp_path: Path, zygote) -> None:
    rc = zygote.run(_argv(digits, tmp_path / "stale"), tmp_path / "stale.log", stale=True)
    err = (tmp_path / "stale.log").read_text()
    assert rc == 1, err[-3000:]
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and err.rstrip().splitlines()[-1] == errors[0], err[-3000:]
    *before, gap = _gaps(tmp_path / "stale", synced=False)  # logged, then stopped: no later step, no checkpoint
    step = _last_step(tmp_path / "stale")  # the first step with an update (a step whose groups all had equal rewards trains nothing)
    assert all(g <= MAX_GAP for g in before) and gap > MAX_GAP
    assert f"weight-sync canary: after the step-{step} sync" in errors[0] and f"{gap:.4g} nats/token" in errors[0]
    assert f"train.canary.max_gap {MAX_GAP:g}" in errors[0] and "stale" in errors[0]
    assert not (tmp_path / "stale" / "checkpoints").exists()

    rc = zygote.run(_argv(digits, tmp_path / "synced"), tmp_path / "synced.log")
    assert rc == 0, (tmp_path / "synced.log").read_text()[-3000:]
    gaps = _gaps(tmp_path / "synced")
    assert 1 <= len(gaps) <= 2 and all(g <= MAX_GAP for g in gaps)
    print(f"\ncanary gap: stale sync {gap:.3g}, correct sync {', '.join(f'{g:.2g}' for g in gaps)} (bound {MAX_GAP})")
