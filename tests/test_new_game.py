"""A new game trains with no learner keys, every phase once; games register from other packages."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config

ROOT = Path(__file__).resolve().parents[1]
SEALED = ROOT / "examples" / "sealed_bid.yaml"


def test_defaults_cover_every_phase_and_bad_phases_are_one_line() -> None:
    cfg = load_config(SEALED)
    assert {p: e.group_by for p, e in cfg.learner.estimators.items()} == {
        "appraise": ["phase", "role"], "bid": ["phase", "role"], "final": ["phase", "role"]
    }
    with pytest.raises(ConfigError, match=r"learner.estimators.vote: the game has no phase 'vote'; its phases: appraise, bid, final"):
        load_config(SEALED, ["learner.estimators={vote: {name: grpo}}"])


@pytest.mark.slow
def test_sealed_bid_trains_every_phase_exactly_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "arena.train", str(SEALED), "--run-dir", str(run), "--set", "train.plot=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["stage"] == "appraise+bid+final"
        # 3 games: 1 appraiser turn and 2 bidder turns per game in each bidding phase.
        assert (row["appraise/turns"], row["bid/turns"], row["final/turns"]) == (3.0, 6.0, 6.0)
        kept = sum(row[f"{p}/turns"] - row[f"{p}/dropped"] for p in ("appraise", "bid", "final"))
        assert row["samples"] == kept  # each trainable turn at most once, none twice


def test_a_game_registers_through_an_entry_point(tmp_path: Path) -> None:
    dist = tmp_path / "walk_games-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: walk-games\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[arena.games]\nwalk = tests.fixtures.walk:WalkGame\n")
    script = textwrap.dedent("""
        from arena.core.registry import game_class, registered_games
        from arena.testing import check_game
        assert registered_games()["walk"] == "tests.fixtures.walk:WalkGame"
        check_game(lambda: game_class("walk")())
        print("ok")
    """)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, **env})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    assert "Warning" not in proc.stderr, proc.stderr  # the kit is quiet outside pytest too
