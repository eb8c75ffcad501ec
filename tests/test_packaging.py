"""One installed package, old paths as deprecated aliases, and a third-party game from its own package (#37).

The wheel is built from this checkout for real (``pip wheel``) and installed into a new virtual
environment outside the checkout. That environment borrows the dependencies of ``.venv`` through a
plain path line in a ``.pth`` file (no torch download), so what it imports as ``arena`` is the wheel.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import warnings
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")  # setuptools' build/ folder, kept out of the checkout
    proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
                cwd=build)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (found,) = out.glob("arena-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A new venv holding the wheel, with .venv's site-packages after its own on sys.path."""
    env = tmp_path_factory.mktemp("venv")
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(env)], cwd=env).returncode == 0
    py = env / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=env).stdout.strip())
    (site / "_arena_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", str(wheel)], cwd=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"arena", "arena_compat.pth"}
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["arena"]
    # every built-in game's YAML and data ship inside arena.games
    for path in ("arena/games/spy/spy.yaml", "arena/games/openspiel/kuhn.yaml", "arena/games/lsp/data/instructions.jsonl",
                 "arena/view/templates/base.html"):
        assert path in names, path


def test_the_installed_wheel_runs_outside_the_checkout(venv: Path, tmp_path: Path) -> None:
    py = str(venv / "bin" / "python")
    where = _run([py, "-c", "import arena, arena.games.spy; print(arena.__file__)"], cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    # games/spy.yaml names the YAML inside the installed package: the run reaches config validation
    proc = _run([py, "-m", "arena.train", "games/spy.yaml", "--set", "train.steps=0"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("error: games/spy.yaml: train.steps"), proc.stderr
    proc = _run([py, "-m", "arena.play", "games/spy/spy.yaml", "--policy", "scripted", "--episodes", "1"],
                cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # a shipped config that extends others (leduc.score -> kuhn.score -> kuhn -> openspiel) finds them in the wheel
    code = ("from arena.loop.config import load_config; c = load_config('games/openspiel/leduc.score.yaml'); "
            "print(c.game.settings.game, c.game.settings.action_mode, c.learner.lr, c.seat_table())")
    proc = _run([py, "-c", code], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "leduc_poker score 0.0001 {'*': 'learner'}", proc.stdout


def test_old_top_level_names_resolve_before_import_arena_in_the_wheel(venv: Path, tmp_path: Path) -> None:
    """arena_compat.pth: a script whose first import is an old path still runs, with a warning naming the new one."""
    code = "from games.spy import SpyGame; import arena.games.spy as new; assert SpyGame is new.SpyGame; print('ok')"
    proc = _run([str(venv / "bin" / "python"), "-W", "always::DeprecationWarning", "-c", code], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    assert "'games' moved to 'arena.games'" in proc.stderr, proc.stderr


def test_a_game_written_against_arena_game_still_runs_with_a_deprecation_warning(tmp_path: Path) -> None:
    game = tmp_path / "old_game.py"
    source = (ROOT / "examples" / "lowest_unique.py").read_text(encoding="utf-8")
    head, _, rest = source.partition("from arena import (")
    _, _, rest = rest.partition(")\n")
    game.write_text(head + textwrap.dedent("""\
        from arena.game import GameConfig, Invalid, LLMGame, Phase
        from arena.messages import Message
        from arena.transcript import format_episode
        from arena.types import ChatMessage
        from arena.runner import Runner
        from arena.testing import check_game
        from policies.scripted import ScriptedPolicy
        """) + rest, encoding="utf-8")
    proc = _run([sys.executable, "-W", "always::DeprecationWarning", str(game)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "conformance kit: passed" in proc.stdout
    for old, new in (("arena.game", "arena.core.game"), ("arena.messages", "arena.core.messages"),
                     ("arena.types", "arena.core.types"), ("policies", "arena.policies")):
        assert f"'{old}' moved to '{new}'" in proc.stderr, (old, proc.stderr[-2000:])
    # the warning points at the importing line of the user's file, not at the import machinery
    assert f"{game}:" in proc.stderr


def test_aliases_are_the_new_modules_themselves() -> None:
    import arena  # noqa: F401 - an editable install (this checkout) has no arena_compat.pth: the alias comes with arena

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        import games.openspiel.exact as old  # noqa: F401
        import learners.estimators as old_est
        from arena.rules import last_integer as old_last
    import arena.core.rules
    import arena.games.openspiel.exact
    import arena.learners.estimators

    assert old is arena.games.openspiel.exact and old_est is arena.learners.estimators
    assert old_last is arena.core.rules.last_integer
    assert {w.category for w in seen} == {DeprecationWarning}
    assert any("'arena.rules' moved to 'arena.core.rules'" in str(w.message) for w in seen)
    assert sys.modules["games.openspiel.exact"] is arena.games.openspiel.exact


def test_another_package_named_games_wins_over_the_alias(tmp_path: Path) -> None:
    (tmp_path / "games").mkdir()
    (tmp_path / "games" / "__init__.py").write_text("MINE = True\n")
    proc = _run([sys.executable, "-c", "import arena, games; print(games.MINE)"], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr


THIRD_PARTY_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "my-arena-games"
version = "0.0.1"

[project.entry-points."arena.games"]
lowest_unique_3p = "my_arena_games.lowest:LowestUniqueGame"

[tool.setuptools.package-data]
my_arena_games = ["*.yaml"]
"""

THIRD_PARTY_YAML = """\
game:
  name: lowest_unique_3p
  n_players: 3
  k: 5
policies:
  learner: {model: smollm2-135m, trainable: true, backend: hf, sampling: {max_new_tokens: 4}}
runner: {num_envs: 2, progress: false}
train: {steps: 1, games_per_step: 2, checkpoint_every: 1, plot: false, episodes: {save: false}}
"""


@pytest.mark.slow
def test_a_third_party_game_installed_from_its_own_package_plays_and_trains(venv: Path, tmp_path: Path) -> None:
    """An entry point in another distribution: the registered name plays with a bot and trains one step."""
    pkg = tmp_path / "src"
    (pkg / "my_arena_games").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(THIRD_PARTY_PYPROJECT)
    (pkg / "my_arena_games" / "__init__.py").write_text("")
    (pkg / "my_arena_games" / "lowest.py").write_text((ROOT / "examples" / "lowest_unique.py").read_text(encoding="utf-8"))
    py = str(venv / "bin" / "python")
    proc = _run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-build-isolation", str(pkg)],
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    work = tmp_path / "work"
    work.mkdir()
    listed = _run([py, "-c", "from arena.core.registry import registered_games as r; print(r()['lowest_unique_3p'])"], cwd=work)
    assert listed.stdout.strip() == "my_arena_games.lowest:LowestUniqueGame", listed.stderr
    (work / "lowest.yaml").write_text(THIRD_PARTY_YAML)
    run = work / "run"
    proc = _run([py, "-m", "arena.train", "lowest.yaml", "--run-dir", str(run)], cwd=work, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (run / "metrics.jsonl").is_file()
    assert list((run / "checkpoints").glob("step_000001*"))
