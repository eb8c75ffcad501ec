"""A new author's path (#26): the brief's commands work as written, and PettingZoo's own tests pass unwrapped."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from arena.core.registry import GAMES, game_class, registered_games
from arena.loop.config import default_config_path, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(GAMES))
def test_games_name_yaml_resolves_to_the_games_own_yaml(name: str) -> None:
    given = f"games/{name}.yaml"
    assert not (ROOT / given).exists()
    assert default_config_path(given) == ROOT / "arena" / "games" / name / f"{name}.yaml"
    assert load_config(given).game.name == name


def test_train_cli_with_games_name_yaml_reaches_config_validation() -> None:
    """As written in the brief: the file resolves, so the run stops at the planted config error (no model loads)."""
    proc = subprocess.run(
        [sys.executable, "-m", "arena.train", "games/spy.yaml", "--set", "train.steps=0"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no such config file" not in proc.stderr and "train.steps" in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", sorted(registered_games()))
def test_pettingzoo_api_and_seed_tests_pass_on_the_game_itself(name: str) -> None:
    """PettingZoo's own tests, called directly on every registered game: no wrapper, no filtered options."""
    from pettingzoo.test import api_test, seed_test

    cls = game_class(name)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        api_test(cls(), num_cycles=50)
    seed_test(lambda: cls(), num_cycles=50)
    assert any("reset ignores unknown option(s) options" in str(w.message) for w in seen)


def test_unknown_options_warn_in_reset_but_fail_in_a_config() -> None:
    from arena.core.errors import ConfigError

    spy = game_class("spy")
    with pytest.warns(UserWarning, match=r"spy_v1: reset ignores unknown option\(s\) spyy; SpyOptions knows: .*spy"):
        spy().reset(seed=0, options={"spyy": 1, "spy": 1})
    with pytest.raises(Exception, match="spyy"):
        spy.validate_options({"spyy": 1})
    with pytest.raises(ConfigError, match=r"train.league.layouts.0.spyy: unknown key"):
        load_config("spy", ["train.league.layouts=[{spyy: 0}]"])


def _sealed_bid() -> type:
    sys.path.insert(0, str(ROOT / "examples"))
    from sealed_bid import SealedBidGame

    return SealedBidGame


def test_action_examples_errors_say_they_run_before_any_reset() -> None:
    class ExamplesFromRoles(_sealed_bid()):  # type: ignore[misc]
        def action_examples(self, seat: str) -> list[str]:
            return ["40"] if self.seat_roles[seat] == "bidder" else ["90"]

    with pytest.raises(RuntimeError, match=r"action_examples\('appraiser_0'\) raised AttributeError.*before any reset"):
        ExamplesFromRoles()


def test_actions_and_outputs_are_public_and_refuse_an_open_hidden_phase() -> None:
    env = _sealed_bid()()
    env.reset(seed=0)
    env.step("I think 70")  # the public appraise phase closes
    assert env.outputs("appraise") == {"appraiser_0": "I think 70"} and env.actions("appraise") == {"appraiser_0": 70}
    env.step("55")  # bidder_0 in the hidden bid phase
    with pytest.raises(PermissionError, match="still open"):
        env.actions("bid")
    env.step("60")
    assert env.actions("bid", 0) == {"bidder_0": 55, "bidder_1": 60}


def test_sealed_needs_hidden_and_a_known_value() -> None:
    from arena.core.game import Phase

    with pytest.raises(ValueError, match="must be hidden"):
        Phase("bid", ("a",), hidden=False, sealed="episode")
    with pytest.raises(ValueError, match="sealed must be"):
        Phase("bid", ("a",), sealed="always")  # type: ignore[arg-type]


def test_transcripts_show_the_rules_once() -> None:
    from arena.core.transcript import format_episode
    from arena.testing import play_texts

    text = format_episode(play_texts(_sealed_bid()(), 0, ["I bid 40", "55"]))
    assert text.count("<system> A sealed-bid auction") == 1
    assert "<system> (the same system message as appraiser_0's turn 0)" in text


def test_play_says_it_is_loading_the_model_before_it_does(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import arena.loop.build as build
    from arena.play import main

    def stop(*args: object, **kwargs: object) -> None:
        raise SystemExit(7)

    monkeypatch.setattr(build, "build_policies", stop)
    with pytest.raises(SystemExit):
        main([str(ROOT / "examples" / "sealed_bid.yaml")])
    assert "loading model smollm2-135m for policy 'learner'" in capsys.readouterr().err


# ---------------------------------------------------------------- #53: a registered game on the command line
def _installed_game(folder: Path, name: str, spec: str) -> dict[str, str]:
    """A package registered under the ``arena.games`` entry points, as ``pip install`` leaves one: a
    ``.dist-info`` folder with its ``entry_points.txt``, on PYTHONPATH. Returns the environment to run with."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[arena.games]\n{name} = {spec}\n")
    package = folder / "old_wolf"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from arena.game import LLMGame  # the path before 0.2: arena.core.game\n"
        "from tests.fixtures.werewolf import WerewolfGame\n\n\n"
        "class OldWolf(WerewolfGame):\n    assert issubclass(WerewolfGame, LLMGame)\n"
    )
    import os

    return {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}


def test_an_entry_point_game_plays_by_name_and_its_old_imports_warn(tmp_path: Path) -> None:
    env = _installed_game(tmp_path, "wwlite", "old_wolf:OldWolf")
    proc = subprocess.run([sys.executable, "-m", "arena.play", "wwlite", "--policy", "scripted", "--bot", "random"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "wwlite: old_wolf:OldWolf has no YAML of its own; using the defaults" in proc.stderr
    assert "DeprecationWarning: 'arena.game' moved to 'arena.core.game'" in proc.stderr  # shown, not swallowed
    assert "old_wolf/__init__.py:1" in proc.stderr  # at the game's own import line
    assert "[vote] player_0" in proc.stdout and "werewolf_lite_v0" in proc.stdout


def test_a_name_that_is_no_file_and_no_game_says_how_to_register_one(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "arena.play", "wwlite", "--policy", "scripted"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "error: wwlite: no such config file, and no game registered under that name (registered: " in proc.stderr
    assert '[project.entry-points."arena.games"] wwlite = "your_package.module:YourGame"' in proc.stderr


def test_credit_says_what_it_needs() -> None:
    from tests.fixtures.werewolf import WerewolfGame

    env = WerewolfGame()
    env.reset(seed=0)
    with pytest.raises(KeyError, match=r"credit: player_0 has no turn in phase 'vote' \(occurrence 0\); a reward is "
                                       r"booked on a turn the seat took in that phase occurrence"):
        env.credit("player_0", "vote", 1.0, occurrence=0)
    with pytest.raises(KeyError, match=r"credit: player_0 has no turn in phase 'vote' \(occurrence -1: it has not opened yet\)"):
        env.credit("player_0", "vote", 1.0)
    guide = (ROOT / "docs" / "guides" / "write-a-game.md").read_text()
    assert "final turn in that phase occurrence" in guide and "## Rewards" in guide
