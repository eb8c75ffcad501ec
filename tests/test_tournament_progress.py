"""The tournament as the guide runs it (#53): its progress counts turns and generate calls, not only whole games, and
``--players NAME=MODEL`` plays a trained checkpoint against the built-in model, each model loaded once.

Why a run of 5 Werewolf-lite games showed 0 of 5 after 27 minutes: not a model loaded per game or seat (each model
loads once, checked below), but a batch of games that ends together (all 5 games are one batch of the runner,
and the bar counted whole batches) played in about 13 ticks a game, two generate calls a tick (one per model),
each call up to 256 tokens a reply: about a minute a call on a loaded 2-core CPU. The bar now moves with every
generate call.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from arena.rank.tournament import Progress, main

ROOT = Path(__file__).resolve().parents[1]
RPS = str(ROOT / "tests" / "fixtures" / "rps.yaml")
SEALED_BID = str(ROOT / "examples" / "sealed_bid.yaml")


def test_progress_counts_turns_and_generate_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    players = ["--players", "scripted:rock", "scripted:paper", "scripted:scissors"]
    out = tmp_path / "rps.json"
    assert main([RPS, *players, "--games", "6", "--json", str(out), "--bootstrap", "10",
                 "--set", "runner.progress=true"]) == 0
    err = capsys.readouterr().err
    # 6 games of 2 simultaneous moves, 4 at a time: 12 turns; each tick asks each player with a pending seat once.
    assert "6/6" in err and "12 turns, " in err and " generate calls" in err
    progress = Progress(total=3, done=1, enabled=False)
    progress.generated(5)
    progress.generated(2)
    assert (progress.turns, progress.calls) == (7, 2)


@pytest.mark.slow  # trains the built-in model one step (about a minute), then 3 games of it against its checkpoint
def test_players_name_equals_model_on_a_trained_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    trained = subprocess.run([sys.executable, "-m", "arena.train", SEALED_BID, "--set", "train.steps=1",
                              "--set", "train.checkpoint_every=1", "--set", "train.plot=false", "--run-dir", str(run)],
                             capture_output=True, text=True, cwd=ROOT, timeout=1200,
                             env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert trained.returncode == 0, trained.stderr[-3000:]
    checkpoint = run / "checkpoints" / "step_000001"
    assert (checkpoint / "model").is_dir()

    import arena.core.models as models

    loads: list[str] = []
    real = models.load_causal_lm

    def counted(name: str, *args: object, **kwargs: object) -> object:  # the real loader, counted
        loads.append(str(name))
        return real(name, *args, **kwargs)

    monkeypatch.setattr(models, "load_causal_lm", counted)
    out = tmp_path / "t.json"
    assert main([SEALED_BID, "--players", "base=smollm2-135m", f"s1={checkpoint}", "--games", "3",
                 "--json", str(out), "--bootstrap", "10", "--set", "runner.progress=true"]) == 0
    captured = capsys.readouterr()
    assert sorted(loads) == sorted(["smollm2-135m", str(checkpoint)])  # once each, for 3 games of 3 seats
    data = json.loads(out.read_text())
    assert len(data["results"]) == 3 and data["player_specs"] == {"base": "base=smollm2-135m", "s1": f"s1={checkpoint}"}
    assert all(set(r["seating"].values()) == {"base", "s1"} for r in data["results"])
    assert "loading model smollm2-135m for player 'base'" in captured.err
    assert " turns, " in captured.err and "3/3" in captured.err
    assert "player" in captured.out and "s1" in captured.out  # the ratings table
