"""arena.rank.eval: held-out seeds, bootstrap intervals, bots or models from the config's seats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from arena.stats.heldout import bootstrap, bootstrap_difference, held_out_seeds
from tolerance import approx64

ROOT = Path(__file__).resolve().parents[2]


def test_held_out_seeds_never_meet_training_seeds() -> None:
    train = {s * 1_000_003 + step * 128 + i for s in range(100) for step in range(1, 1000, 97) for i in range(128)}
    assert not train & set(held_out_seeds(0, 1000)) and not train & set(held_out_seeds(99, 1000))


def test_bootstrap_interval_holds_the_mean_and_shrinks_with_more_games() -> None:
    rng = np.random.default_rng(0)
    small = bootstrap(list(rng.random(20)))
    large = bootstrap(list(rng.random(2000)))
    for mean, low, high in (small, large):
        assert low <= mean <= high
    assert large[2] - large[1] < (small[2] - small[1]) / 4
    assert bootstrap([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)


def test_bootstrap_difference_paired_and_unpaired_against_a_reference_loop() -> None:
    a, b = [0.3, 0.4, 0.9, 0.35], [0.33, 0.5, 1.0, 0.3]
    # A constant per-seed shift is known exactly when paired; unpaired, the spread of each arm widens it.
    assert bootstrap_difference([1.0, 2.0, 5.0], [0.5, 1.5, 4.5]) == (0.5, 0.5, 0.5)
    unpaired = bootstrap_difference([1.0, 2.0, 5.0], [0.5, 1.5, 4.5], paired=False)
    assert abs(unpaired[0] - 0.5) < 1e-12 and unpaired[1] < 0 < 1 < unpaired[2]
    # The reference: the same seeded draws, a's block of resamples then b's.
    _, low, high = bootstrap_difference(a, b, paired=False, resamples=500, seed=3)
    rng = np.random.default_rng(3)
    i, j = rng.integers(0, 4, size=(500, 4)), rng.integers(0, 4, size=(500, 4))
    ref = np.percentile(np.take(a, i).mean(axis=1) - np.take(b, j).mean(axis=1), [2.5, 97.5])
    assert (low, high) == approx64(tuple(ref))
    d = np.subtract(a, b)
    assert bootstrap_difference(a, b, resamples=500, seed=3) == bootstrap(d, resamples=500, seed=3)
    assert abs(bootstrap_difference(a, b, seed=1)[0] - (np.mean(a) - np.mean(b))) < 1e-12


def test_eval_cli_on_bots(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    proc = subprocess.run(
        [sys.executable, "-m", "arena.eval", "examples/sealed_bid.yaml", "--set", "seats={'*': 'scripted:shrewd'}",
         "--games", "30", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert len(summary["seeds"]) == 30 and min(summary["seeds"]) >= 2**40
    m = summary["metrics"]["reward/bidder"]
    assert m["low"] <= m["mean"] <= m["high"] and m["n"] == 30
    assert "outcome/appraiser" in summary["metrics"] and "reward/bidder" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "arena.eval", "spy", "--games", "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --games: at least 2 games make an interval (got 1)"
