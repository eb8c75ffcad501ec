"""arena.stats.seating and arena.rank.tournament with scripted players (fast: no model)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from arena.cli import run_cli
from arena.rank.tournament import main
from arena.stats.seating import balance, schedule

ROOT = Path(__file__).resolve().parents[1]
RPS = str(ROOT / "tests" / "fixtures" / "rps.yaml")
SPY = str(ROOT / "arena" / "games" / "spy" / "spy.yaml")
SPY_SEATS = [f"player_{i}" for i in range(4)]
SPY_LAYOUTS = [{"spy": k} for k in range(4)]


def spy_roles(tables):
    return {t.index: {s: "spy" if i == t.options["spy"] else "civilian" for i, s in enumerate(SPY_SEATS)} for t in tables}


def test_five_players_four_seats_exact_balance():
    tables = schedule(list("abcde"), SPY_SEATS, rounds=5, seed=3, layouts=SPY_LAYOUTS)
    counts = balance(tables, spy_roles(tables))
    assert len(tables) == 20
    assert counts["games"] == {p: 16 for p in "abcde"}  # each sits out exactly one round of 4 games
    assert set(counts["pairs"].values()) == {12}  # every pair shares exactly 3 rounds
    assert counts["roles"] == {(p, r): n for p in "abcde" for r, n in (("spy", 4), ("civilian", 12))}


def test_three_players_two_seats_exact_balance():
    tables = schedule(list("abc"), ["left", "right"], rounds=3, seed=0)
    counts = balance(tables, {t.index: {"left": "left", "right": "right"} for t in tables})
    assert counts["pairs"] == {("a", "b"): 2, ("a", "c"): 2, ("b", "c"): 2}
    assert counts["roles"] == {(p, r): 2 for p in "abc" for r in ("left", "right")}


def test_fewer_players_than_seats_share_the_table_evenly():
    tables = schedule(["a", "b"], SPY_SEATS, rounds=4, seed=0, layouts=SPY_LAYOUTS)
    counts = balance(tables, spy_roles(tables))
    assert counts["roles"][("a", "spy")] == counts["roles"][("b", "spy")] == 8


def test_schedule_is_seeded():
    a = schedule(list("abcdef"), SPY_SEATS, 6, seed=1)
    assert a == schedule(list("abcdef"), SPY_SEATS, 6, seed=1)
    assert a != schedule(list("abcdef"), SPY_SEATS, 6, seed=2)


def run(*args: str) -> int:
    return main([*args, "--bootstrap", "100"])


def test_rock_paper_scissors_cycle_found_and_resume_equals_uninterrupted(tmp_path: Path, capsys):
    players = ["--players", "scripted:rock", "scripted:paper", "scripted:scissors"]
    full = tmp_path / "full.json"
    assert run(RPS, *players, "--games", "18", "--json", str(full)) == 0
    out = capsys.readouterr().out
    assert "scripted:rock > scripted:scissors > scripted:paper > scripted:rock" in out
    data = json.loads(full.read_text())
    assert data["summary"]["cycles"] == [["scripted:rock", "scripted:scissors", "scripted:paper"]]
    assert full.with_suffix(".png").stat().st_size > 0
    # An interrupted run: the file as it stood after the first games, one of them marked.
    part = tmp_path / "part.json"
    cut = json.loads(full.read_text())
    cut["results"] = cut["results"][:7]
    del cut["summary"]
    cut["results"][0]["episode_id"] = "played-before-the-interruption"
    part.write_text(json.dumps(cut))
    assert run(RPS, *players, "--games", "18", "--json", str(part)) == 0
    assert "7 of 18 games already played" in capsys.readouterr().out
    resumed = json.loads(part.read_text())
    assert resumed["results"][0]["episode_id"] == "played-before-the-interruption"  # read back, not replayed
    resumed["results"][0]["episode_id"] = data["results"][0]["episode_id"]
    assert resumed == data


def test_spy_tournament_balances_roles_in_the_played_games(tmp_path: Path, capsys):
    bots = ["scripted:copycat", "scripted:extractive", "scripted:fixed_vote:0", "scripted:fixed_vote:2", "scripted:random"]
    out = tmp_path / "spy.json"
    layouts = "[{spy: 0}, {spy: 1}, {spy: 2}, {spy: 3}]"
    assert run(SPY, "--players", *bots, "--games", "20", "--layouts", layouts, "--json", str(out),
               "--set", "runner.progress=false", "--set", "game.n_players=4") == 0
    data = json.loads(out.read_text())
    roles = Counter((r["seating"][s], role) for r in data["results"] for s, role in r["roles"].items())
    assert roles == {(b, role): n for b in bots for role, n in (("spy", 4), ("civilian", 12))}
    assert set(data["summary"]["payoff"]) == {"overall", "spy", "civilian"}
    bt = data["summary"]["bradley_terry"]
    assert bt["scripted:copycat"]["rating"] == 1000.0 and all(bt[b]["low"] <= bt[b]["rating"] <= bt[b]["high"] for b in bots)


@pytest.mark.parametrize(("args", "message"), [
    (["--players", "scripted:rock"], "at least 2 players"),
    (["--players", "scripted:rock", "scripted:nope"], "unknown bot 'nope'"),
    (["--players", "scripted:rock", "./runs/no_such_run"], "no such folder"),
    (["--players", "scripted:rock", "scripted:paper", "--anchor", "x"], "--anchor"),
    (["--players", "scripted:rock", "scripted:paper", "--layouts", "[{spy: 1}]"], "--layouts"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: main([RPS, *args, "--json", str(tmp_path / "t.json")]))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_different_tournament_in_the_json_is_refused(tmp_path: Path, capsys):
    path = tmp_path / "t.json"
    assert run(RPS, "--players", "scripted:rock", "scripted:paper", "--games", "2", "--json", str(path)) == 0
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: main([RPS, "--players", "scripted:rock", "scripted:scissors", "--json", str(path)]))
    assert exit_.value.code == 2 and "different tournament" in capsys.readouterr().err
    shutil.rmtree(tmp_path)
