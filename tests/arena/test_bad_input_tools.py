"""Bad input to the bench scripts, the TextArena word games, ``arena.serve``'s vLLM arguments and the
multi-rank launch (issue 54): one line, no traceback, and nothing from the libraries underneath.

The bench scripts run in this process through :func:`arena.cli.run_cli`, as their ``__main__`` does; the
launches run in a subprocess (torchrun's launcher and vLLM's parser are whole programs).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from test_bad_input_flags import refused

ROOT = Path(__file__).resolve().parents[2]
KUHN = "games/openspiel/kuhn.yaml"
LEDUC = "games/openspiel/leduc.yaml"


def bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- bench/card_dependence.py
SUPPORTED = "card dependence is measured on two-player kuhn_poker and leduc_poker"


@pytest.mark.parametrize(("argv", "needle"), [
    (["arena/games/spy/spy.yaml"], "'spy' is not one"),
    (["arena/games/textarena/textarena.yaml"], "'textarena' is not one"),
    ([KUHN, "--set", "game.params={players: 3}"], "kuhn_poker(players=3) is not one"),
    ([LEDUC, "--set", "game.params={players: 3}"], "leduc_poker(players=3) is not one"),
    (["games/openspiel/openspiel.yaml", "--set", "game.game=tic_tac_toe"], "tic_tac_toe() is not one"),
])
def test_card_dependence_names_the_games_it_measures(argv: list[str], needle: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    refused(bench("card_dependence").main, argv, capsys, f"game: {SUPPORTED}", needle)


def test_card_dependence_scores_leduc_with_its_parameters() -> None:
    """The rows come from the config's game, parameters included; the exploitability is of that game too
    (it loaded plain Leduc, whose information states the rows of a suit-isomorphic Leduc do not name)."""
    import numpy as np
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability

    from arena.loop.config import load_config
    from arena.rank.exploitability import played_rows

    cfg = load_config(LEDUC, ["game.params={suit_isomorphism: true}"])
    game = cfg.game.settings.load()
    uniform = os_policy.TabularPolicy(game)
    rows = played_rows(cfg.game.make_env(), np.asarray(uniform.action_probability_array))
    value = bench("card_dependence").exploitability_of_rows(game, rows)
    assert value == float(exploitability.exploitability(game, uniform))


# ---------------------------------------------------------------- bench/kuhn_learning.py
@pytest.mark.parametrize(("argv", "needles"), [
    (["--parallel", "0"], ["--parallel: must be between 1 and 64 (got 0)"]),
    (["--parallel", "-2", "--report", "."], ["--parallel"]),
    (["--steps", "0"], ["--steps: must be >= 1 (got 0)"]),
    (["--seeds", "0", "-1"], ["--seeds: must be >= 0 (got -1)"]),
    (["--played", "1000000000", "--report", "."], ["--played: must be between 0 and 10000"]),
    (["--report", "/no/such/folder"], ["--report: '/no/such/folder' is not a folder of runs"]),
    (["--plot", "/no/such/folder"], ["--plot: '/no/such/folder' is not a folder of runs"]),
    (["--set", "learner.lr=-1", "--arms", "RAE"], ["--set: games/openspiel/kuhn.yaml: learner.lr"]),
])
def test_kuhn_learning_flags(argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    refused(bench("kuhn_learning").main, argv, capsys, *needles)


def test_kuhn_learning_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = bench("kuhn_learning")
    blocker = tmp_path / "file"
    blocker.write_text("")
    refused(module.main, ["--out", str(blocker / "runs")], capsys, "--out", "is a file, not a folder")
    refused(module.main, ["--plot", str(tmp_path), "--png", str(tmp_path)], capsys, "--png", "is a directory")
    refused(module.main, ["--report", str(tmp_path)], capsys, f"no run in {tmp_path} has logged", code=1)


def test_kuhn_learning_fails_when_every_run_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Every arm's arena.train exits 2 (a planted failure): the bench says so and exits 1, no empty table."""
    module = bench("kuhn_learning")

    def train(argv: list[str], stdout: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        stdout.write("error: planted: this run could not start\n")
        return subprocess.CompletedProcess(argv, 2)

    monkeypatch.setattr(module.subprocess, "run", train)
    line = refused(module.main, ["--seeds", "0", "1", "--arms", "RAE", "--parallel", "1", "--out", str(tmp_path)],
                   capsys, "every run failed (2 of 2)", "error: planted: this run could not start", code=1)
    assert "| run |" not in capsys.readouterr().out, line


# ---------------------------------------------------------------- TextArena games that need NLTK's data
def test_a_word_game_without_its_nltk_data_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    nltk = pytest.importorskip("nltk")
    try:
        nltk.data.find("corpora/words")
        pytest.skip("NLTK's words corpus is installed here: Wordle-v0 loads")
    except LookupError:
        pass
    from arena.core.errors import ConfigError
    from arena.loop.config import load_config

    monkeypatch.setattr(nltk.downloader._downloader, "_url", "http://127.0.0.1:9/index.xml")  # offline, wherever
    with pytest.raises(ConfigError) as err:
        load_config("arena/games/textarena/textarena.yaml", ["game.env_id=Wordle-v0"])
    message = str(err.value)
    assert "\n" not in message
    assert "game: env_id: Wordle-v0 needs NLTK data that is not installed" in message and "words" in message
    assert "python -m nltk.downloader" in message
    assert "nltk_data" not in capfd.readouterr().err  # the downloader's four lines per failed download


# ---------------------------------------------------------------- launches
def launch(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def one_line(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, err[-3000:])
    for noise in ("Traceback", "ChildFailedError", "torch/distributed", "usage:"):
        assert noise not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and err.splitlines()[-1] == lines[0], err[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_ranks_refuse_a_bad_config_once_before_any_rank_starts() -> None:
    proc = launch(["-m", "arena.train", "examples/sealed_bid.yaml", "--ranks", "2", "--set", "learner.lr=-1"])
    one_line(proc, 2, "learner.lr: Input should be greater than 0 (got -1)")
    proc = launch(["-m", "arena.train", "examples/sealed_bid.yaml", "--ranks", "2", "--set", "train.games_per_step=3"])
    one_line(proc, 2, "train.games_per_step: 3 games do not split over WORLD_SIZE=2 ranks")


def test_ranks_that_fail_are_one_line_without_torchruns_report() -> None:
    """Both ranks refuse their flags (arena.play --seed -1): one line, the ranks', not torchrun's 30-line report;
    a rank that exits without one (json.tool on a missing file) is named with its exit code."""
    run = "from arena.cli import launch_ranks; raise SystemExit(launch_ranks({!r}, 2, {!r}))"
    one_line(launch(["-c", run.format("arena.play", [KUHN, "--policy", "scripted", "--seed", "-1"])]), 2,
             "--seed: must be >= 0 (got -1)")
    proc = launch(["-c", run.format("json.tool", ["/no/such/file.json"])])
    assert proc.returncode == 2 and "ChildFailedError" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == "error: rank 0 of 2 exited with code 2; its output is above"


def test_serve_refuses_a_flag_vllm_does_not_know_in_one_line() -> None:
    pytest.importorskip("vllm", reason="arena.serve needs vLLM")
    proc = launch(["-m", "arena.serve", "smollm2-135m", "--dry-run", "--", "--bad-flag"], timeout=600)
    one_line(proc, 2, "vLLM refuses the arguments after --", "unrecognized arguments: --bad-flag")
