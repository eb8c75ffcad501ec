"""Bad flags of the CLIs (issue 54): one line, exit 2, no traceback, before any policy is built.

Each case runs the CLI's ``main`` in this process through :func:`arena.cli.run_cli`, as ``python -m`` does,
with ``build_policies`` (and the tournament's ``schedule``) made to fail: a flag refused after the policies
were built (a model loaded) fails the test, and so does one never refused (an unbounded ``--sample`` reaches
the build instead of running for ever; a billion games reach the schedule).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

KUHN = "games/openspiel/kuhn.yaml"
LSP = "games/lsp/lsp.yaml"
PLAYERS = ["--players", "scripted:cfr", "scripted:random"]


def refused(main: Callable[[list[str]], Any], argv: list[str], capsys: pytest.CaptureFixture[str],
            *needles: str, code: int = 2) -> str:
    """Run ``main(argv)`` as its CLI does; assert one ``error:`` line holding ``needles`` and exit ``code``."""
    from arena.cli import run_cli

    with pytest.raises(SystemExit) as stop:
        run_cli(lambda: main(argv))
    err = capsys.readouterr().err
    assert stop.value.code == code, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0], err[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(autouse=True)
def no_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    import arena.loop.build
    import arena.rank.tournament

    def late(what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"{what}: the flag was not refused at start-up")

        return refuse

    monkeypatch.setattr(arena.loop.build, "build_policies", late("policies were built"))
    monkeypatch.setattr(arena.rank.tournament, "schedule", late("the tournament was scheduled"))


# ---------------------------------------------------------------- arena.play
@pytest.mark.parametrize(("flags", "needles"), [
    (["--seed", "-1"], ["--seed: must be >= 0 (got -1)"]),
    (["--episodes", "-3"], ["--episodes: must be between 1 and 100000 (got -3)"]),
    (["--episodes", "0"], ["--episodes", "(got 0)"]),
    (["--episodes", "1000000000"], ["--episodes", "another --seed"]),
    (["--human", "player_9"], ["--human: the game has no seat 'player_9'", "player_0, player_1"]),
])
def test_play_flags(flags: list[str], needles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from arena.play import main

    refused(main, [KUHN, "--policy", "scripted", *flags], capsys, *needles)


def test_play_jsonl_that_is_not_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.play import main

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # writing would block until someone reads it
    refused(main, [KUHN, "--policy", "scripted", "--jsonl", str(fifo)], capsys, "--jsonl", "not a regular file")
    if Path("/dev/full").exists():  # every write fails: once the games are over, before this
        refused(main, [KUHN, "--policy", "scripted", "--jsonl", "/dev/full"], capsys, "--jsonl", "not a regular file")


# ---------------------------------------------------------------- arena.eval
def test_eval_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.rank.eval import main

    refused(main, [KUHN, "--episodes", str(tmp_path)], capsys, "--episodes", "is a directory")
    refused(main, [KUHN, "--episodes", str(tmp_path / "no" / "e.jsonl")], capsys, "--episodes", "does not exist")
    refused(main, [KUHN, "--games", "1000000000"], capsys, "--games: must be between 2 and 100000")
    refused(main, [KUHN, "--seed", "-1"], capsys, "--seed: must be >= 0 (got -1)")


@pytest.mark.parametrize(("flags", "needles"), [
    (["--sample", "1000000000"], ["--sample: must be between 0 and 10000 (got 1000000000)"]),
    (["--bootstrap", "1000000000"], ["--bootstrap: must be between 0 and 10000 (got 1000000000)"]),
    (["--sample", "-1"], ["--sample: must be between 0 and 10000 (got -1)"]),
    (["--sample", "4", "--bootstrap", "-2"], ["--bootstrap: must be between 0 and 10000 (got -2)"]),
])
def test_exploitability_sample_and_bootstrap_are_bounded(flags: list[str], needles: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from arena.rank.eval import main

    refused(main, ["exploitability", KUHN, *flags], capsys, *needles)


def test_pairwise_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.rank.eval import main

    base = ["pairwise", LSP, "--base", "judge", "--judge", "judge"]
    refused(main, [*base, "--temperature", "nan"], capsys, "--temperature: must be a finite number >= 0 (got nan)")
    refused(main, [*base, "--max-new-tokens", "0"], capsys, "--max-new-tokens: must be >= 1 (got 0)")
    refused(main, [*base, "--json", str(tmp_path)], capsys, "--json", "is a directory")
    refused(main, [*base, "--data", str(tmp_path)], capsys, "--data: cannot read")


# ---------------------------------------------------------------- arena.tournament
@pytest.mark.parametrize(("flags", "needles"), [
    (["--games", "0"], ["--games: must be between 1 and 100000 (got 0)"]),
    (["--games", "8"], ["--games: --exact plays no games"]),
    (["--bootstrap", "-1"], ["--bootstrap: must be between 0 and 10000 (got -1)"]),
    (["--bootstrap", "500"], ["--bootstrap: --exact plays no games"]),
    (["--layouts", "[{spy: 0}]"], ["--layouts: --exact plays no games"]),
])
def test_exact_tournament_refuses_the_flags_of_played_games(flags: list[str], needles: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from arena.rank.tournament import main

    refused(main, [KUHN, *PLAYERS, "--exact", *flags], capsys, *needles)


def test_tournament_output_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.rank.tournament import main

    blocker = tmp_path / "file"
    blocker.write_text("")
    for mode in (["--exact"], []):
        refused(main, [KUHN, *PLAYERS, *mode, "--json", str(tmp_path)], capsys, "--json", "is a directory")
        refused(main, [KUHN, *PLAYERS, *mode, "--png", str(tmp_path)], capsys, "--png", "is a directory")
        refused(main, [KUHN, *PLAYERS, *mode, "--png", str(tmp_path / "heat.xyz")], capsys, "--png",
                "does not end in an image type")
        refused(main, [KUHN, *PLAYERS, *mode, "--json", str(blocker / "t.json")], capsys, "--json", "is a file, not a folder")


@pytest.mark.parametrize(("flags", "needles"), [
    (["--bootstrap", "1000000000"], ["--bootstrap: must be between 0 and 10000"]),
    (["--games", "1000000000"], ["--games: must be between 1 and 100000"]),
    (["--seed", "-1"], ["--seed: must be >= 0 (got -1)"]),
])
def test_played_tournament_flags(flags: list[str], needles: list[str], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from arena.rank.tournament import main

    refused(main, [KUHN, *PLAYERS, *flags, "--json", str(tmp_path / "t.json")], capsys, *needles)
