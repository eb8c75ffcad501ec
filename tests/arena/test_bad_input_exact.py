"""Bad input around the exact yardstick (issue #34): one line, exit 2, no traceback, at start-up (before
any model loads or game is played).

* a best-response bot ``scripted:br:<bot>`` seated on a game too large to enumerate, named in ``seats``,
  in the policy table, or as a tournament player;
* an exact tournament (``arena.tournament --exact``) on a game too large to enumerate, or not OpenSpiel;
* an exact evaluation (``train.evals`` kind exact) on a game too large to enumerate;
* ``train.stop_when`` naming a metric no evaluation logs (the played-policy metrics are ones it logs).

Each case runs the real CLI in a subprocess, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KUHN = "arena/games/openspiel/kuhn.yaml"
SPY = "games/spy/spy.yaml"
LIMIT = "has more than 20000 information states"


def _cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], check=False, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout,
                          env=os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    lines = err.splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], err[-2000:]
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])
    assert "precision:" not in proc.stdout + proc.stderr  # printed once the config is valid, before a model loads
    return lines[-1]


def _sets(*items: str) -> list[str]:
    return [a for item in items for a in ("--set", item)]


@pytest.mark.parametrize(("items", "field"), [
    (["seats={player_0: learner, player_1: 'scripted:br:random'}"], "seats.player_1: scripted:br:random: "),
    (["seats={player_0: learner, player_1: 'scripted:br'}"], "seats.player_1: scripted:br:cfr: "),
    (["policies.opp={kind: scripted, bot: 'br:random'}", "seats={player_0: learner, player_1: opp}"],
     "policies.opp.bot: scripted:br:random: "),
])
def test_a_best_response_bot_on_a_game_too_large_is_refused_at_start_up(items: list[str], field: str,
                                                                        tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _cli(["arena.train", KUHN, *_sets("game.game=tic_tac_toe", "train.evals=[]", *items), "--run-dir", str(run)])
    _one_line(proc, field + f"tic_tac_toe() {LIMIT}")
    assert not run.exists()
    proc = _cli(["arena.play", KUHN, *_sets("game.game=tic_tac_toe", *items), "--episodes", "1"])
    _one_line(proc, field + f"tic_tac_toe() {LIMIT}")
    assert "episode" not in proc.stdout  # no game began


def test_a_best_response_bot_on_leduc_is_accepted() -> None:
    """The check does not refuse what the bot can play (Leduc: 936 information states)."""
    from arena.loop.config import load_config

    cfg = load_config(KUHN, ["game.game=leduc_poker", "seats={player_0: learner, player_1: 'scripted:br:random'}"])
    assert cfg.seat_table()["player_1"] == "scripted:br:random"


def test_a_best_response_tournament_player_on_a_game_too_large_is_one_line(tmp_path: Path) -> None:
    proc = _cli(["arena.tournament", KUHN, *_sets("game.game=tic_tac_toe", "train.evals=[]"), "--players", "scripted:random",
                 "scripted:br:random", "--games", "2", "--json", str(tmp_path / "t.json")])
    _one_line(proc, "--players", f"scripted:br:random: tic_tac_toe() {LIMIT}")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(("config", "items", "needles"), [
    (KUHN, ["game.game=tic_tac_toe"], ["--exact: tic_tac_toe() has more than 20000 information states",
                                       "game.exploitability_max_states"]),
    (KUHN, ["game.game=leduc_poker", "game.exploitability_max_states=100"],
     ["--exact: leduc_poker() has more than 100 information states"]),
    (SPY, [], ["--exact: exact head-to-head values are for games small enough to enumerate", "'spy' is not one"]),
])
def test_an_exact_tournament_on_a_game_it_cannot_enumerate_is_one_line(config: str, items: list[str],
                                                                       needles: list[str], tmp_path: Path) -> None:
    players = ["scripted:random", "scripted:cfr"] if config == KUHN else ["scripted:random", "scripted:copycat"]
    proc = _cli(["arena.tournament", config, "--exact", *_sets(*items), "--players", *players,
                 "--json", str(tmp_path / "t.json")])
    _one_line(proc, *needles)
    assert not (tmp_path / "t.json").exists()


def test_an_exact_evaluation_on_a_game_too_large_is_refused_at_start_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _cli(["arena.train", KUHN, *_sets("game.game=tic_tac_toe"), "--run-dir", str(run)])
    _one_line(proc, f"train.evals.exploitability.kind: exact: tic_tac_toe() {LIMIT}", "exploitability_max_states")
    assert not run.exists()


@pytest.mark.parametrize(("metric", "needle"), [
    ("exploitability/exploitability_playd", "train.stop_when.0.metric: evaluation 'exploitability' logs no metric "
     "'exploitability_playd'; valid: exploitability/exploitability, exploitability/exploitability_cfr, "
     "exploitability/exploitability_played, "),
    ("exploitability/invalid_rate", "logs no metric 'invalid_rate'; valid: "),
    ("play/exploitability", "'play/exploitability' names no evaluation; write '<eval name>/<metric>' with an "
     "evaluation of train.evals: exploitability"),
])
def test_stop_when_naming_a_metric_no_evaluation_logs_is_one_line(metric: str, needle: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _cli(["arena.train", KUHN, *_sets(f"train.stop_when=[{{metric: {metric}, '<=': 0.05}}]"),
                 "--run-dir", str(run)])
    _one_line(proc, needle)
    assert not run.exists()


def test_stop_when_on_the_played_policy_metrics_is_accepted() -> None:
    from arena.loop.config import load_config

    rules = ("train.stop_when=[{metric: exploitability/exploitability_played, '<=': 0.05}, "
             "{metric: exploitability/legal_mass_min, '>=': 0.5}, {metric: exploitability/invalid_rate_played, "
             "patience: 3, mode: min}]")
    cfg = load_config(KUHN, [rules])
    assert [r.key for r in cfg.train.stop_when] == ["eval/exploitability/exploitability_played",
                                                    "eval/exploitability/legal_mass_min",
                                                    "eval/exploitability/invalid_rate_played"]
