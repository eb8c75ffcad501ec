"""Evaluation inside training (arena/loop/components/evals.py, ``train.evals``).

The runs train examples/sealed_bid.py in-process with the real Trainer and runner on the
tiny randomly initialised model with a digit-writing head (tests/forked_runs.py), so bids
are valid and varied and each step really changes the weights: a few seconds a run, no
SmolLM2 weights loaded. The evaluation plays the game with ``max_bid`` changed (``set``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.cli import run_cli
from arena.core.errors import ConfigError
from arena.core.types import read_jsonl
from arena.loop.config import load_config
from arena.loop.components.evals import EvalSpec, ReseededPolicy, eval_row, is_due
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything
from arena.stats.heldout import held_out_seeds
from forked_runs import digit_model
from test_league import tiny_model  # noqa: F401  (the fixture: a 2-layer random model, SmolLM2's tokenizer)

ROOT = Path(__file__).resolve().parents[1]
STEPS = 3
EVALS = "train.evals=[{name: wide, every: 2, games: 3, set: {game.max_bid: 1000}}, {name: narrow, every: 3, games: 2, " \
        "set: {game.max_bid: 10}, metrics: ['reward/*']}]"
SETS = [
    "policies.learner.sampling.max_new_tokens=4", "policies.learner.backend=hf", "game.max_bid=10000",
    "train.games_per_step=2", f"train.steps={STEPS}", "train.checkpoint_every=1", "train.keep_checkpoints=3",
    "train.plot=false", "learner.lr=1e-3", "runner.progress=false",
]


# ------------------------------------------------------------------ config
@pytest.mark.parametrize(("item", "message"), [
    ("{name: x, set: {game.max_bidd: 50}}", "train.evals.x.set.game.max_bidd: unknown key"),
    ("{name: x, set: {game.max_bid: 5}}", "train.evals.x.set.game.max_bid: Input should be greater than or equal to 10 (got 5)"),
    ("{name: x, set: {learner.lr: 1.0}}", "train.evals.0.set: 'learner.lr': only game settings"),
    ("{name: x, every: 0}", "train.evals.0.every: Input should be greater than or equal to 1"),
    ("{name: x, games: 1}", "train.evals.0.games: Input should be greater than or equal to 2"),
    ("{name: 'a/b'}", "train.evals.0.name: must be letters"),
    ("{name: x, metrics: []}", "train.evals.0.metrics: name at least one metric"),
])
def test_a_bad_eval_is_a_one_line_config_error(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(ROOT / "examples/sealed_bid.yaml", [f"train.evals=[{item}]"])
    with pytest.raises(ConfigError, match="two evaluations are named 'x'"):
        load_config(ROOT / "examples/sealed_bid.yaml", ["train.evals=[{name: x}, {name: x}]"])


def test_the_cli_exits_2_with_one_line_before_any_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    from arena.train import main

    argv = ["games/household/household.yaml", "--set", "policies.learner.model=/nonexistent",
            "--set", "train.evals=[{name: h, set: {game.task_types: heldout}}]"]
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: main(argv))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: games/household/household.yaml: train.evals.h.set.game.task_types")


def test_household_configs_evaluate_in_domain_and_held_out_worlds() -> None:
    for name in ("household.yaml", "household.auso.yaml"):
        cfg = load_config(ROOT / "arena/games/household" / name)
        evals = {e.name: e for e in cfg.train.evals}
        assert set(evals) == {"in_domain", "held_out"}
        for key, e in evals.items():
            assert e.set == {"game.split": "eval", "game.task_types": key}
            assert (e.every or cfg.train.checkpoint_every) in (cfg.train.checkpoint_every, cfg.train.steps)
            assert 2 <= e.games <= 8
        from arena.loop.components.evals import eval_settings

        settings = eval_settings(cfg.game.cls, cfg.game.settings, evals["held_out"])
        assert (settings.split, settings.task_types, settings.attempts) == ("eval", "held_out", cfg.game.settings.attempts)


# ------------------------------------------------------------------ pure parts
def test_schedule_is_step_zero_every_k_and_the_last_step() -> None:
    spec = EvalSpec(name="e", every=3)
    assert [s for s in range(11) if is_due(spec, s, last=10, checkpoint_every=5)] == [0, 3, 6, 9, 10]
    default = EvalSpec(name="e")  # every: the checkpoint interval
    assert [s for s in range(8) if is_due(default, s, last=7, checkpoint_every=2)] == [0, 2, 4, 6, 7]


def test_logged_keys_and_metric_patterns() -> None:
    summary = {"game/success_rate": {"mean": 0.5, "low": 0.25, "high": 0.75},
               "game/success/heat": {"mean": 1.0, "low": 1.0, "high": 1.0},
               "reward/agent": {"mean": 0.1, "low": 0.0, "high": 0.2}}
    row = eval_row("held_out", summary, ["success_rate", "success/*"])
    assert row == {"eval/held_out/success_rate": 0.5, "eval/held_out/success_rate_lo": 0.25,
                   "eval/held_out/success_rate_hi": 0.75, "eval/held_out/success/heat": 1.0,
                   "eval/held_out/success/heat_lo": 1.0, "eval/held_out/success/heat_hi": 1.0}
    assert "eval/held_out/reward/agent" in eval_row("held_out", summary, None)


def test_reseeding_mixes_the_salt_into_every_request_seed() -> None:
    from arena.policies.base import Request

    class Echo:
        name = "echo"

        def generate(self, requests):  # the seeds it was asked with
            return [r.seed for r in requests]

    reqs = [Request(messages=[], seed=s) for s in (1, 2)]
    a, b = ReseededPolicy(Echo(), 7).generate(reqs), ReseededPolicy(Echo(), 8).generate(reqs)
    assert a == ReseededPolicy(Echo(), 7).generate(reqs) and len(set(a + b)) == 4
    assert [r.seed for r in reqs] == [1, 2]  # the caller's requests are not changed


# ------------------------------------------------------------------ real training runs
@pytest.fixture(scope="module")
def digits(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return digit_model(tiny_model, tmp_path_factory.mktemp("digits") / "model")


def train(model: Path, run: Path, extra: list[str], max_steps: int | None = None, resume: bool = False) -> Trainer:
    cfg = load_config(ROOT / "examples/sealed_bid.yaml", [f"policies.learner.model={model}", *SETS, *extra])
    seed_everything(cfg.train.seed)
    trainer = Trainer(cfg, run, resume=run if resume else None)
    trainer.run(max_steps)
    return trainer


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Trainer | None]]:
    base = tmp_path_factory.mktemp("runs")
    out: dict[str, tuple[Path, Trainer | None]] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls on a shared 2-core box run several times faster on one thread
    try:
        out["on"] = (base / "on", train(digits, base / "on", [EVALS]))
        out["off"] = (base / "off", train(digits, base / "off", []))
        train(digits, base / "resumed", [EVALS], max_steps=1)
        out["resumed"] = (base / "resumed", train(digits, base / "resumed", [EVALS], resume=True))
    finally:
        torch.set_num_threads(threads)
    return out


def training_part(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("eval/") and k not in TIMING_KEYS}


def test_training_is_identical_with_evaluations_on_or_off(runs) -> None:
    (on, t_on), (off, t_off) = runs["on"], runs["off"]
    trained = [r for r in rows(on) if r["step"] > 0]
    assert [training_part(r) for r in trained] == [training_part(r) for r in rows(off)]
    assert any(r.get("loss") for r in trained), "nothing trained: the comparison would be empty"
    for (name, a), b in zip(t_on.learner.module.state_dict().items(), t_off.learner.module.state_dict().values()):
        assert torch.equal(a, b), name
    assert not (off / "evals").exists()


def test_evaluations_are_logged_when_due_with_bounds(runs) -> None:
    run = runs["on"][0]
    by_step = {r["step"]: r for r in rows(run)}
    assert sorted(by_step) == [0, 1, 2, 3]
    due = {s: sorted({k.split("/")[1] for k in r if k.startswith("eval/")}) for s, r in by_step.items()}
    assert due == {0: ["narrow", "wide"], 1: [], 2: ["wide"], 3: ["narrow", "wide"]}
    assert set(by_step[0]) == {"step", "time/eval_s", *(k for k in by_step[3] if k.startswith("eval/"))}
    assert "time/eval_s" not in by_step[1]
    for r in by_step.values():
        means = [k for k in r if k.startswith("eval/") and not k.endswith(("_lo", "_hi"))]
        for k in means:
            assert r[f"{k}_lo"] <= r[k] <= r[f"{k}_hi"], (r["step"], k)
        assert all(k.split("/", 2)[2].startswith("reward/") for k in means if k.startswith("eval/narrow/"))
    assert {"eval/wide/reward/bidder", "eval/wide/invalid_turn_rate", "eval/wide/truncated_rate"} <= set(by_step[0])
    wide = [by_step[s]["eval/wide/reward/bidder"] for s in (0, 2, 3)]
    assert len(set(wide)) > 1, "the evaluation did not see the weights change"


def test_every_evaluation_plays_the_same_held_out_games(runs) -> None:
    run = runs["on"][0]
    played = {p.name.split(".")[0]: list(read_jsonl(p)) for p in sorted((run / "evals" / "wide").glob("step_*.jsonl.gz"))}
    assert list(played) == ["step_000000", "step_000002", "step_000003"]
    seeds = {stem: [ep.seed for ep in eps] for stem, eps in played.items()}
    assert all(s == held_out_seeds(0, 3) for s in seeds.values())
    first_prompts = {stem: [ep.turns[0].messages for ep in eps] for stem, eps in played.items()}
    assert len({json.dumps(p, default=str) for p in first_prompts.values()}) == 1  # the same worlds
    assert "1000" in json.dumps(first_prompts["step_000000"], default=str)  # with the eval's max_bid


def test_a_resumed_run_evaluates_as_an_uninterrupted_one(runs) -> None:
    straight = {r["step"]: r for r in rows(runs["on"][0])}
    resumed = {r["step"]: r for r in rows(runs["resumed"][0])}
    for step in (0, 2, 3):
        want = {k: v for k, v in straight[step].items() if k.startswith("eval/")}
        got = {k: v for k, v in resumed[step].items() if k.startswith("eval/")}
        assert got == want and want, step
    assert "eval/narrow/reward/bidder" in resumed[1]  # step 1 was that run's last step before the resume


def test_the_curves_plot_has_a_panel_per_evaluation(runs) -> None:
    from arena.loop.plot import panels_for, plot_run, read_metrics

    run = runs["on"][0]
    panels = dict(panels_for(run, read_metrics(run)))
    titles = [t for t in panels if t.startswith("eval ")]
    assert len(titles) == 2 and all("untrained" in t for t in titles)
    assert all(not k.endswith(("_lo", "_hi")) for t in titles for k in panels[t])
    assert plot_run(run).stat().st_size > 0
