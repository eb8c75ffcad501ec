"""Bad input in the features added since the last round (issue #38): one line, exit 2, no traceback,
and before any model loads where the value can be checked without one.

Each case runs the real CLI in a subprocess, as a user would. A case that needs the model's layers
(LoRA target modules) reads them from the model's config with empty weights, so it stays fast too.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPY = "games/spy/spy.yaml"
KUHN = "games/openspiel/kuhn.yaml"
OPENSPIEL = "games/openspiel/openspiel.yaml"
SEALED = "examples/sealed_bid.yaml"


def _cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    last = err.splitlines()[-1]
    assert last.startswith("error: "), err[-2000:]
    for needle in needles:
        assert needle in last, (needle, last)
    return last


def _sets(*items: str) -> list[str]:
    return [a for item in items for a in ("--set", item)]


@pytest.mark.parametrize(("game", "params", "needle"), [
    ("turn_based_simultaneous_game", None, "wraps another game"),
    ("misere", None, "wraps another game"),
    ("nfg_game", None, "nfg_game rejects params"),
    ("liars_dice", "{numdice: 0}", "cannot be played"),
])
def test_openspiel_games_that_cannot_be_played_as_given(game: str, params: str | None, needle: str) -> None:
    extra = [f"game.game={game}"] + ([f"game.params={params}"] if params else [])
    proc = _cli(["arena.play", OPENSPIEL, "--policy", "scripted", "--episodes", "1", *_sets(*extra)])
    _one_line(proc, needle)


def test_every_registered_openspiel_game_loads_or_gives_one_line() -> None:
    import pyspiel

    from arena.games.openspiel.rules import GameLoadError, load_game

    for name in pyspiel.registered_names():
        try:
            load_game(name)
        except GameLoadError as e:
            assert "\n" not in str(e), name


@pytest.mark.parametrize(("args", "needle"), [
    (["smollm2-135m", "--host", "999.1.1.1"], "--host"),
    (["smollm2-135m", "--kv-cache-gb", "0"], "--kv-cache-gb"),
    (["smollm2-135m", "--kv-cache-gb", "-1"], "--kv-cache-gb"),
    (["smollm2-135m", "--max-model-len", "100000000"], "exceeds the model's context"),
    (["no-such-model-name"], "is not in the local"),
])
def test_serve_bad_arguments(args: list[str], needle: str) -> None:
    pytest.importorskip("vllm", reason="arena.serve needs vLLM")
    _one_line(_cli(["arena.serve", *args], env={"HF_HUB_OFFLINE": "1"}), needle)


def test_exploitability_output_paths(tmp_path: Path) -> None:
    _one_line(_cli(["arena.eval", "exploitability", KUHN, "--json", str(tmp_path)]), "--json", "is a directory")
    _one_line(_cli(["arena.eval", "exploitability", KUHN, "--json", str(tmp_path / "no" / "x.json")]),
              "--json", "does not exist")
    _one_line(_cli(["arena.play", KUHN, "--policy", "scripted", "--jsonl", str(tmp_path)]), "--jsonl", "is a directory")


def test_warm_start_files_that_are_not_what_they_claim(tmp_path: Path) -> None:
    plain = tmp_path / "episodes.jsonl.gz"
    plain.write_text('{"episode_id": "e", "game": "spy_v1"}\n')  # plain text under a gzip name
    binary = tmp_path / "pairs.jsonl"
    binary.write_bytes(b"\xff\xfe\x00\x81 not text\n")
    bad_gz = tmp_path / "bad.jsonl.gz"
    bad_gz.write_bytes(gzip.compress(b"\xff\xfe\x00 not text\n"))
    run = ["arena.train", SPY, "--run-dir", str(tmp_path / "run")]
    _one_line(_cli([*run, *_sets(f"train.warm_start={{source: episodes, path: {plain}}}")]), "train.warm_start.path",
              "not a JSONL of episodes")
    _one_line(_cli([*run, *_sets(f"train.warm_start={{source: pairs, path: {binary}}}")]), "train.warm_start.path",
              "not a UTF-8 JSONL of pairs")
    _one_line(_cli([*run, *_sets(f"train.warm_start={{source: episodes, path: {bad_gz}}}")]), "train.warm_start.path")
    assert not (tmp_path / "run").exists()  # refused before the run began


@pytest.mark.parametrize(("items", "needle"), [
    (["learner.lr=.inf"], "learner.lr: Input should be a finite number"),
    (["learner.lr=.nan"], "learner.lr"),
    (["learner.lora={target_modules: [q_proj, v_prj]}"], "v_prj match(es) no linear layer"),
    (["learner.lora={target_modules: [nope]}"], "nope match(es) no linear layer"),
    (["play.bot=nosuch"], "play.bot: unknown bot 'nosuch'"),
    (["train.league={enabled: true, bots: [scripted:nosuch]}"], "train.league.bots.0: unknown bot 'nosuch'"),
    (["train.memory.release_engine=true", "policies.learner.backend=hf"],
     "train.memory.release_engine: true, but policies.learner generates with backend 'hf'"),
    (["train.memory.release_engine=true", "learner.lora={r: 8}"],
     "train.memory.release_engine: true, but policies.learner trains a LoRA adapter"),
    (["train.memory.release_engine=true", "train.async={max_staleness: 1}"],
     "train.memory.release_engine: true, but train.async plays"),
    (["train.memory.release_engine=sometimes"], "train.memory.release_engine"),
])
def test_train_refuses_before_any_model_loads(items: list[str], needle: str, tmp_path: Path) -> None:
    proc = _cli(["arena.train", SPY, *_sets(*items), "--run-dir", str(tmp_path / "run")], env={"HF_HUB_OFFLINE": "1"})
    _one_line(proc, needle)
    assert "precision:" not in proc.stderr and "precision:" not in proc.stdout  # printed once the config is valid


def test_a_hub_id_neither_cached_nor_served_is_one_line_at_load(tmp_path: Path) -> None:
    """A hub id cannot be checked without the network, so a config with one validates; loading it asks the
    cache, then the hub once, and answers in one line (HF_HUB_OFFLINE here: this machine reaches no hub)."""
    proc = _cli(["arena.train", SEALED, "--set", "policies.learner.model=NoSuchOrg/no-such-model", "--run-dir",
                 str(tmp_path / "run")], env={"HF_HUB_OFFLINE": "1"})
    _one_line(proc, "hub id 'NoSuchOrg/no-such-model' is not in the local Hugging Face cache")


def test_an_unreachable_mlflow_server_is_one_line(tmp_path: Path) -> None:
    proc = _cli(["arena.train", SEALED, "--set", "train.loggers=[mlflow]", "--run-dir", str(tmp_path / "run")],
                env={"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}, timeout=120)
    _one_line(proc, "MLFLOW_TRACKING_URI=http://127.0.0.1:9 does not answer")


def test_async_over_several_ranks_is_refused_by_the_rank_check() -> None:
    from arena.core.errors import ConfigError
    from arena.loop.config import load_config
    from arena.train import check_ranks

    cfg = load_config(SEALED, ["train.async={max_staleness: 1}", "train.games_per_step=4"])
    with pytest.raises(ConfigError, match="train.async: async rollouts run on one rank"):
        check_ranks(cfg, 2)
