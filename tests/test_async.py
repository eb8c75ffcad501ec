"""Async rollouts (``train.async``, arena/loop/components/rollouts.py) on real training runs of a tiny model.

The sealed-bid example with tests/test_league.py's 2-layer random model and tests/forked_runs.py's
digit head (valid, varied bids and real gradients). Checked: k = 0 is bit-identical to the
synchronous loop; with k = 1 and 2 each step is played by exactly the weights of update
``t - 1 - k`` (replayed by a fresh trainer on those weights); a run resumed from a checkpoint with
a step in flight equals the uninterrupted run; bad settings are one-line config errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.core.errors import ConfigError
from arena.core.types import read_jsonl
from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything
from forked_runs import digit_model
from test_league import tiny_model  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    "policies.learner.sampling.max_new_tokens=3", "game.max_bid=10000", "runner.progress=false",
    "train.games_per_step=3", "train.steps=4", "train.checkpoint_every=2", "train.plot=false", "learner.lr=1e-3",
    "learner.beta=0", "train.episodes.save=false", "train.loggers=[]", "runner.episodes_jsonl=episodes.jsonl",
]
NOT_COMPARED = set(TIMING_KEYS) | {"time/play_s", "time/sync_wait_s", "async/staleness", "gen/tokens_per_s"}


@pytest.fixture(scope="module")
def digits(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return digit_model(tiny_model, tmp_path_factory.mktemp("async") / "digits", scale=1.0)  # varied bids


def config(model: Path, *extra: str):
    return load_config(ROOT / "examples/sealed_bid.yaml", [f"policies.learner.model={model}", *SETS, *extra])


def train(model: Path, run: Path, *extra: str, resume: Path | None = None, steps: int | None = None) -> Trainer:
    seed_everything(0)
    trainer = Trainer(config(model, *extra), run, resume=resume)
    trainer.run(steps)
    return trainer


def rows(run: Path) -> list[dict]:
    out = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in NOT_COMPARED} for r in out]


def completions(run: Path) -> list[list[str]]:
    return [[t.completion for t in ep.turns] for ep in read_jsonl(run / "episodes.jsonl")]


def weights(trainer: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.learner.module.parameters()]


def test_k0_is_bit_identical_to_the_synchronous_loop(digits: Path, tmp_path: Path) -> None:
    sync = train(digits, tmp_path / "sync")
    k0 = train(digits, tmp_path / "k0", "train.async.max_staleness=0")
    assert rows(tmp_path / "k0") == rows(tmp_path / "sync")
    assert completions(tmp_path / "k0") == completions(tmp_path / "sync")
    assert all(torch.equal(a, b) for a, b in zip(weights(k0), weights(sync), strict=True))
    assert sum(r["samples"] > 0 for r in rows(tmp_path / "sync")) >= 2  # it trained


@pytest.mark.parametrize("k", [1, 2])
def test_each_step_is_played_by_the_weights_k_versions_old(digits: Path, tmp_path: Path, k: int) -> None:
    run = tmp_path / f"k{k}"
    trainer = train(digits, run, f"train.async.max_staleness={k}", "train.checkpoint_every=1", "train.keep_checkpoints=4")
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["async/staleness"] for r in logged] == [min(t - 1, k) for t in range(1, 5)]
    assert all(r["is/ratio_mean"] > 0 and "is/over_cap_frac" in r for r in logged)
    assert all(r["sync/canary_gap"] < 1e-3 for r in logged)  # the generator's own copy, synced every step
    played = completions(run)
    n = 3  # games per step
    for t in range(1, 5):  # replay step t on the weights of update t-1-k: the same games, token for token
        version = max(0, t - 1 - k)
        checkpoint = run / "checkpoints" / f"step_{version:06d}" if version else None
        seed_everything(0)
        fresh = Trainer(config(digits, "runner.episodes_jsonl=null"), tmp_path / f"replay{t}", resume=checkpoint)
        episodes, _ = fresh.play_step(t)
        assert [[x.completion for x in ep.turns] for ep in episodes] == played[(t - 1) * n : t * n], t
    assert trainer.feature("async_").pipeline is None  # the thread is gone after run()


def test_a_resumed_run_with_a_step_in_flight_equals_the_straight_run(digits: Path, tmp_path: Path) -> None:
    straight = train(digits, tmp_path / "straight", "train.async.max_staleness=1")
    checkpoint = tmp_path / "straight" / "checkpoints" / "step_000002"
    inflight = sorted(p.name for p in (checkpoint / "inflight").iterdir())
    assert inflight == ["step_3.jsonl"]  # played by update 1's weights, trained after the checkpoint
    resumed = train(digits, tmp_path / "resumed", "train.async.max_staleness=1", resume=checkpoint)
    assert rows(tmp_path / "resumed") == rows(tmp_path / "straight")[2:]
    assert completions(tmp_path / "resumed") == completions(tmp_path / "straight")[6:]
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(straight), strict=True))
    with pytest.raises(ConfigError, match="holds 1 step\(s\) in flight, max_staleness 2 needs 2"):
        Trainer(config(digits, "train.async.max_staleness=2"), tmp_path / "other", resume=checkpoint)


def test_a_run_stopped_early_keeps_its_step_in_flight(digits: Path, tmp_path: Path) -> None:
    """run(max_steps) stops at a checkpoint; the games of the next step were played by the old weights and
    are saved, so the resumed run continues as if never stopped."""
    train(digits, tmp_path / "cut", "train.async.max_staleness=1", steps=2)
    assert (tmp_path / "cut" / "checkpoints" / "step_000002" / "inflight" / "step_3.jsonl").is_file()
    straight = train(digits, tmp_path / "straight", "train.async.max_staleness=1")
    resumed = train(digits, tmp_path / "cut2", "train.async.max_staleness=1",
                    resume=tmp_path / "cut" / "checkpoints" / "step_000002")
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(straight), strict=True))


@pytest.mark.parametrize(("setting", "message"), [
    ("train.async.max_staleness=-1", "train.async.max_staleness"),
    ("train.async={max_staleness: 1, queue: 3}", "train.async.queue"),
])
def test_bad_async_settings_are_one_line(digits: Path, setting: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")) as e:
        config(digits, setting)
    assert "\n" not in str(e.value)


def test_async_with_the_league_is_refused_in_one_line(digits: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="train.async: async rollouts with train.league are not supported"):
        Trainer(config(digits, "train.async.max_staleness=1", "train.league.enabled=true"), tmp_path / "x")
