"""The viewer's run store (arena/view/store.py) on scripted run folders: episodes from training's
step files and from the held-out evaluations, metrics of a run in progress. The folders are made
by ``make_scripted_run`` of tests/test_view.py (SpyRL with scripted bots, written as training writes)."""

from __future__ import annotations

from pathlib import Path

from arena.loop.config import load_config
from arena.runner import EpisodeSpec, Runner, SeatMap
from arena.view.store import RunStore
from arena.policies.scripted import ScriptedPolicy, make_bot
from test_view import TINY, make_scripted_run


def test_store_reads_a_run_in_progress(tmp_path: Path) -> None:
    make_scripted_run(tmp_path, steps=2, games=2)
    store = RunStore(tmp_path)
    rows = store.rows()
    assert [r.step for r in rows] == [1, 1, 2, 2] and {r.game for r in rows} == {"spy_v1"}
    assert all(r.outcome.startswith("won: ") for r in rows)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "lo')  # a line still being written is not read yet
    metrics, count, skipped, more = store.metrics()
    assert [m["step"] for m in metrics] == [1, 2] and count == 2 and skipped == 0 and not more
    assert store.episode("episodes/step_000002.jsonl.gz/1")[1]["episode_id"] == rows[3].episode_id
    assert store.episode("nope/0") is None and store.episode("episodes/step_000001.jsonl.gz/x") is None


def test_store_lists_the_evaluation_games_apart_from_training(tmp_path: Path) -> None:
    from arena.core.types import write_jsonl

    make_scripted_run(tmp_path, steps=2, games=2)
    cfg = load_config("games/spy/spy.yaml", TINY)
    runner = Runner(cfg.game.make_env, {"bot": ScriptedPolicy(make_bot(cfg.game.cls, "copycat"), name="bot")},
                    SeatMap({"*": "bot"}), state=cfg.game.make_env().make_state())
    held_out = runner.play([EpisodeSpec(seed=9_000 + i) for i in range(3)])
    (tmp_path / "evals" / "wide").mkdir(parents=True)
    write_jsonl(held_out, tmp_path / "evals" / "wide" / "step_000002.jsonl.gz")  # as arena/loop/components/evals.py saves them
    store = RunStore(tmp_path)
    rows = store.rows()
    assert [(r.step, r.source) for r in rows] == [(1, "train")] * 2 + [(2, "train")] * 2 + [(2, "eval:wide")] * 3
    evals = rows[4:]
    assert [r.key for r in evals] == [f"evals/wide/step_000002.jsonl.gz/{i}" for i in range(3)]
    assert [r.seed for r in evals] == [9_000, 9_001, 9_002]
    row, ep = store.episode("evals/wide/step_000002.jsonl.gz/2")  # type: ignore[misc]
    assert row.source == "eval:wide" and ep["seed"] == 9_002 and row.episode_id == held_out[2].episode_id
    assert store.episode("episodes/step_000002.jsonl.gz/1")[1]["seed"] == 201  # training's step 2 keeps its own keys
