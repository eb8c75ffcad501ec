"""Two CPU ranks (issue #16): real ``torchrun --nproc_per_node 2 -m arena.train`` processes on gloo.

The runs train examples/sealed_bid.py (4 games a step, 4-token bids, a checkpoint every
step) on the tiny random model with a digit-writing head that the chaos tests use
(tests/forked_runs.py), with one game at a time per rank (``runner.num_envs=1``) so
that a game's batches, hence its sampled tokens, are the same whichever rank plays it.
The one-rank reference is a real ``arena.train`` process forked from the shared zygote.

* 2 ranks (gradients summed by ``sum_grads``) give, after step 1 and step 2, the one-rank
  run's parameters within 1e-5, and the one-rank run's step metrics (:func:`compare_metrics`);
* a 2-rank run stopped after step 1's checkpoint (``--max-steps 1``) and continued with
  ``--resume`` ends with the parameters and metrics of the uninterrupted 2-rank run
  (rank 1's RNG is restored from ``ranks/rank_1.pt``).

The same three checks run with ``learner.backend=deepspeed`` and ZeRO stage 2 (gradients
reduced and optimizer state partitioned by DeepSpeed; each rank saves its own optimizer
partition). Until DeepSpeed's CPU shared-memory all-reduce op was kept from building
(``arena.learners.ds.skip_shm_comm_build``), its spinning made single ZeRO steps take minutes on
this 2-core box and one finished run never exited; without it a 2-rank ZeRO-2 run of two
steps takes about 22 s here.

Six torchrun launches in all (each pays two fresh interpreters' imports).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.core.distributed import Dist, from_env
from arena.core.errors import ConfigError
from arena.loop.trainer import TIMING_KEYS
from forked_runs import digit_model
from test_chaos import assert_same_metrics
from test_league import tiny_model  # noqa: F401  (the fixture: a 2-layer random model, SmolLM2's tokenizer)
from tolerance import LOGITS, approx32, scale_of

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    "policies.learner.sampling.max_new_tokens=4", "game.max_bid=10000", "train.games_per_step=4", "train.steps=2",
    "train.checkpoint_every=1", "train.keep_checkpoints=2", "train.plot=false", "learner.lr=1e-3",
    "runner.num_envs=1",
]
# Summed over ranks, so "micro-batches run", which depends on how each rank packs its own samples.
PER_RANK_KEYS = {"micro_batches"}


def argv(model: Path, run: Path, *extra: str, sets: tuple[str, ...] = ()) -> list[str]:
    pairs = [a for item in [f"policies.learner.model={model}", *SETS, *sets] for a in ("--set", item)]
    return ["examples/sealed_bid.yaml", *pairs, "--run-dir", str(run), *extra]


def torchrun(args: list[str], log: Path) -> float:
    """Run ``torchrun --standalone --nproc_per_node 2 -m arena.train ARGS``; its wall time."""
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "arena.train", *args]
    start = time.monotonic()
    with open(log, "w") as out:  # its own session, so that a timeout also ends the ranks torchrun started
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=1200)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    assert rc == 0, log.read_text()[-4000:]
    return time.monotonic() - start


def weights(run: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(run / "checkpoints" / f"step_{step:06d}" / "model" / "model.safetensors")


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def rows(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS} for line in lines]


def compare_metrics(got: list[dict], want: list[dict]) -> None:
    """Every metric but the per-rank ones agrees to the float32 rule: of order 1, but the importance ratios
    (``is/*``: exp of a log-prob's difference from the generator's), which are as exact as the logits whose
    difference they are (``LOGITS``): each rank scores its own rows, another batch of the same matmuls."""
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for key in w.keys() - PER_RANK_KEYS:
            if isinstance(w[key], float):
                terms = LOGITS if key.startswith("is/") else 1.0
                assert g[key] == approx32(w[key], scale=scale_of(w[key], terms)), (w["step"], key)
            else:
                assert g[key] == w[key], (w["step"], key)


@pytest.fixture(scope="module")
def runs(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, zygote) -> dict[str, Path]:  # noqa: F811
    """The one-rank run, the 2-rank run, and a 2-rank run stopped after step 1 and resumed."""
    tmp = tmp_path_factory.mktemp("multirank")
    model = digit_model(tiny_model, tmp / "model")
    out = {name: tmp / name for name in ("one", "two", "resumed")}
    start = time.monotonic()
    assert zygote.run(argv(model, out["one"]), tmp / "one.log") == 0
    one = time.monotonic() - start
    two = torchrun(argv(model, out["two"]), tmp / "two.log")
    torchrun(argv(model, out["resumed"], "--max-steps", "1"), tmp / "stopped.log")
    assert [r["step"] for r in rows(out["resumed"])] == [1]
    torchrun(argv(model, out["resumed"], "--resume", str(out["resumed"])), tmp / "resumed.log")
    print(f"\n1 rank {one:.1f} s (forked), 2 ranks {two:.1f} s (torchrun, two fresh interpreters)")
    return out


@pytest.fixture(scope="module")
def zero2(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, zygote) -> dict[str, Path]:
    """As ``runs``, with the DeepSpeed learner at ZeRO stage 2 (the same digit model)."""
    tmp = tmp_path_factory.mktemp("zero2")
    model = runs["one"].parent / "model"
    ds = ("learner.backend=deepspeed", "learner.deepspeed.zero_stage=2")
    out = {name: tmp / name for name in ("one", "two", "resumed")}
    assert zygote.run(argv(model, out["one"], sets=ds), tmp / "one.log") == 0
    torchrun(argv(model, out["two"], sets=ds), tmp / "two.log")
    torchrun(argv(model, out["resumed"], "--max-steps", "1", sets=ds), tmp / "stopped.log")
    torchrun(argv(model, out["resumed"], "--resume", str(out["resumed"]), sets=ds), tmp / "resumed.log")
    return out


def test_zero2_over_two_ranks_gives_the_one_rank_run_and_resumes_exactly(zero2: dict[str, Path]):
    for step in (1, 2):
        diff = max_diff(weights(zero2["two"], step), weights(zero2["one"], step))
        again = max_diff(weights(zero2["resumed"], step), weights(zero2["two"], step))
        print(f"ZeRO-2 step {step}: 2 ranks vs 1 rank {diff:.3g}, resumed vs uninterrupted {again:.3g}")
        assert diff < 1e-5 and again <= 1e-7
    assert max_diff(weights(zero2["one"], 2), weights(zero2["one"], 1)) > 1e-4, "step 2 changed the weights"
    compare_metrics(rows(zero2["two"]), rows(zero2["one"]))
    assert_same_metrics(rows(zero2["resumed"]), rows(zero2["two"]))
    import torch

    # the partitioned optimizer: rank 0 saved each rank's own partition (Trainer.save)
    saved = torch.load(zero2["two"] / "checkpoints" / "step_000002" / "optimizer.pt", weights_only=False)
    assert isinstance(saved["optimizer"], list) and len(saved["optimizer"]) == 2


def test_two_ranks_give_the_one_rank_parameters_and_metrics(runs: dict[str, Path]):
    initial = weights(runs["one"], 1)
    for step in (1, 2):
        diff = max_diff(weights(runs["two"], step), weights(runs["one"], step))
        print(f"step {step}: max |param diff| 2 ranks vs 1 rank = {diff:.3g}")
        assert diff < 1e-5
    assert max_diff(weights(runs["one"], 2), initial) > 1e-4, "step 2 changed the weights (the test can fail)"
    compare_metrics(rows(runs["two"]), rows(runs["one"]))
    checkpoint = runs["two"] / "checkpoints" / "step_000002"
    assert (checkpoint / "ranks" / "rank_1.pt").is_file() and not (checkpoint / "ranks" / "rank_0.pt").exists()
    assert not (runs["two"] / "ranks").exists()


def test_two_ranks_resume_exactly(runs: dict[str, Path]):
    for step in (1, 2):
        diff = max_diff(weights(runs["resumed"], step), weights(runs["two"], step))
        print(f"step {step}: max |param diff| resumed vs uninterrupted = {diff:.3g}")
        assert diff <= 1e-7
    assert_same_metrics(rows(runs["resumed"]), rows(runs["two"]))


def test_games_per_step_must_split_over_the_ranks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from arena.train import main

    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match=r"train.games_per_step: 4 games do not split over WORLD_SIZE=3"):
        main(argv(Path("smollm2-135m"), tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_ranks_from_the_launcher_environment():
    assert from_env({}) == Dist() and from_env({"WORLD_SIZE": "1", "RANK": "0"}) == Dist()
    d = from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"})
    assert (d.rank, d.world, d.local_rank, d.active, d.main) == (3, 4, 1, True, False)
    games = list(range(8))
    blocks = [Dist(rank=r, world=4).block(games) for r in range(4)]
    assert blocks == [[0, 1], [2, 3], [4, 5], [6, 7]] and [g for b in blocks for g in b] == games
    with pytest.raises(ValueError, match="do not split"):
        Dist(rank=0, world=3).block(games)


@pytest.mark.parametrize(("sets", "field"), [
    (["train.league.enabled=true"], "train.league.enabled"),
    (["learner.backend=deepspeed", "learner.deepspeed.zero_stage=3"], "learner.deepspeed.zero_stage"),
])
def test_what_several_ranks_refuse(sets: list[str], field: str):
    from arena.loop.config import load_config
    from arena.train import check_ranks

    cfg = load_config(ROOT / "examples/sealed_bid.yaml", ["train.games_per_step=4", *sets])
    with pytest.raises(ConfigError, match=rf"^{field}: "):
        check_ranks(cfg, 2)
