"""The config reader has bounds (issue #54): nesting, integer size, alias expansion, file size and type, in a
file and in ``--set``; a duplicate key in a ``--set`` flow mapping; each is one line naming what is wrong
(arena/loop/compose.py). Each case ran for ever, used gigabytes or gave a traceback before."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.loop.compose import MAX_BYTES, MAX_DEPTH, MAX_NODES
from arena.loop.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SPY = str(ROOT / "arena/games/spy/spy.yaml")


def laughs(levels: int = 10, width: int = 9) -> str:
    """A "billion laughs": ``width ** levels`` strings from a few hundred bytes of aliases."""
    lines = [f'a0: &a0 [{", ".join(["lol"] * width)}]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def merges(depth: int = 25) -> str:
    """Chained merge keys: each mapping merges the one before twice (2 ** depth keys once expanded)."""
    lines = ["m0: &m0 {k: 1}"] + [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], x{i}: 1}}" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("text", "says"), [
    ("game: {name: spy}\n" + laughs(), f"expand to more than {MAX_NODES} nodes"),
    ("game: {name: spy}\n" + merges(), f"expand to more than {MAX_NODES} nodes"),
    ("game: {name: spy}\nx: " + "[" * 400 + "]" * 400 + "\n", f"nested more than {MAX_DEPTH} levels deep"),
    ("game: {name: spy}\ntrain: {steps: " + "9" * 5000 + "}\n", "an integer of 5000 digits; at most 100"),
    ("game: {name: spy}\n" + "#" * (MAX_BYTES + 10) + "\n", f"a config is at most {MAX_BYTES} bytes"),
])
def test_a_file_past_a_bound_is_one_line_at_once(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=says) as e:
        load_config(path)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(path))
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize(("value", "says"), [
    ("[" + ", ".join(["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [f"&b{i} [*{'a' if i == 0 else f'b{i - 1}'}" + f", *{'a' if i == 0 else f'b{i - 1}'}" * 9 + "]" for i in range(8)]) + "]",
     "expand to more than"),
    ("[" * 300 + "]" * 300, f"nested more than {MAX_DEPTH} levels deep"),
    ("9" * 5000, "an integer of 5000 digits"),
    ("{spy: 1, spy: 2}", "'spy' is given twice"),
])
def test_a_set_past_a_bound_is_one_line(value: str, says: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=says) as e:
        load_config(SPY, [f"game.params={value}"])
    assert "\n" not in str(e.value) and str(e.value).startswith("--set game.params")
    assert time.perf_counter() - t0 < 5


def test_a_fifo_and_a_device_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ConfigError, match="not a regular file"):
            load_config(path)


def test_the_cli_says_it_in_one_line_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("game: {name: spy}\n" + laughs())
    out = subprocess.run([sys.executable, "-m", "arena.train", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "expand to more than" in out.stderr


def test_exact_descent_with_a_bot_seat_is_refused() -> None:
    """train.descent descends the trainable policy at every seat: a bot in a seat was silently left out."""
    with pytest.raises(ConfigError, match=r"train.descent descends the trainable policy at every seat .*, but "
                                          r"seats.player_1 plays 'scripted:cfr'"):
        load_config("games/openspiel/kuhn.ed.yaml", ["seats={player_0: learner, player_1: 'scripted:cfr'}"])
