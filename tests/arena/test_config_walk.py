"""The config's trip from the builder stays short (issue #52): bench/config_walk.py's static walk, on the tree under
test, within the goals (30 stops, 10 files, 5 climbs), and the walker itself on a hand-built package."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import config_walk  # noqa: E402


def test_the_builder_walk_is_within_the_goals() -> None:
    stops, files, climbs = config_walk.summary(config_walk.walk(ROOT / "arena", "arena.loop.build:build_trainer"))
    assert stops <= 30 and files <= 10 and climbs <= 5, (stops, files, climbs)


def test_the_walker_counts_stops_files_and_climbs(tmp_path: Path) -> None:
    pkg = tmp_path / "arena"
    (pkg / "loop").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def leaf(x):\n    return x\n")
    (pkg / "loop" / "__init__.py").write_text("")
    (pkg / "loop" / "mid.py").write_text("from arena.low import leaf\n\ndef mid(cfg):\n    return leaf(cfg.a)\n")
    (pkg / "loop" / "top.py").write_text(
        "from arena.loop.mid import mid\nfrom arena.low import leaf\n\n"
        "def start(cfg, other):\n    leaf(other)\n    b = mid(cfg)\n    leaf(b)\n    return mid(b)\n")
    walker = config_walk.walk(pkg, "arena.loop.top:start")
    # start (floor 2) -> mid (1) -> leaf (0, another layer: not walked) -> leaf (0) -> mid (1, again: a stop, a
    # climb, its body not walked twice); leaf(other) reads no config: no stop
    assert [name for _, name in walker.stops[1:]] == ["mid", "leaf", "leaf", "mid"]
    assert config_walk.summary(walker) == (4, 2, 1)
