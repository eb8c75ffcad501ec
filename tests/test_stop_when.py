"""train.stop_when (arena/loop/stop.py, issue #34): the pure decision against hand cases, one-line config
errors at start-up (exit 2), and a real run on a tiny model that stops, checkpoints and says why."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config
from arena.loop.stop import StopRule, StopWatch, decide, evals_since_best

ROOT = Path(__file__).resolve().parents[1]
KUHN = ROOT / "arena/games/openspiel/kuhn.yaml"
KEY = "eval/k/exploitability"
NAN = math.nan


def rule(**kw) -> StopRule:
    return StopRule.model_validate({"metric": "k/exploitability", **kw})


# ------------------------------------------------------------------ the decision (pure)
@pytest.mark.parametrize(("values", "mode", "delta", "since"), [
    ([], "min", 0.0, 0),
    ([0.5], "min", 0.0, 0),
    ([0.5, 0.4, 0.3], "min", 0.0, 0),
    ([0.5, 0.4, 0.4, 0.45], "min", 0.0, 2),        # a tie is no improvement
    ([0.5, 0.6, 0.7], "max", 0.0, 0),
    ([0.5, 0.6, 0.55, 0.6], "max", 0.0, 2),
    ([0.5, 0.46, 0.455], "min", 0.05, 2),          # neither is more than 0.05 below 0.5
    ([0.5, 0.449, 0.44], "min", 0.05, 1),
    ([NAN, 0.5, NAN, 0.6], "min", 0.0, 2),         # NaN never improves; the first real value is the first best
    ([0.3, NAN, NAN], "max", 0.0, 2),
])
def test_evals_since_best(values, mode, delta, since) -> None:
    assert evals_since_best(values, mode, delta) == since


@pytest.mark.parametrize(("rules", "values", "fires"), [
    ([{"<=": 0.05}], [0.4, 0.06], None),
    ([{"<=": 0.05}], [0.4, 0.05], 0),                # at the threshold: stops
    ([{"<=": 0.05}], [0.04, 0.06], None),            # the latest value counts
    ([{">=": 0.9}], [0.5, 0.9], 0),
    ([{">=": 0.9}], [0.5, 0.89], None),
    ([{"patience": 2, "mode": "min"}], [0.5, 0.4, 0.41], None),
    ([{"patience": 2, "mode": "min"}], [0.5, 0.4, 0.41, 0.4], 0),
    ([{"patience": 2, "mode": "max"}], [0.5, 0.4, 0.41, 0.6], None),
    ([{"patience": 1, "mode": "min", "min_delta": 0.1}], [0.5, 0.45], 0),
    ([{"<=": 0.01}, {"patience": 1, "mode": "min"}], [0.5, 0.5], 1),  # the rule that fires is named
    ([{"<=": 0.6}, {"patience": 1, "mode": "min"}], [0.5, 0.5], 0),   # the first that fires wins
    ([{"<=": 0.05}], [], None),                      # nothing logged yet
])
def test_decide_by_hand(rules, values, fires) -> None:
    stop = decide([rule(**r) for r in rules], {KEY: values})
    assert (stop.rule if stop else None) == fires
    if stop is not None:
        assert stop.metric == "k/exploitability" and stop.value == values[-1]
        assert f"train.stop_when.{fires}" in stop.reason


def test_reasons_say_what_crossed() -> None:
    assert decide([rule(**{"<=": 0.05})], {KEY: [0.04]}).reason == \
        "k/exploitability = 0.04 <= 0.05 (train.stop_when.0)"
    assert decide([rule(patience=2, mode="min")], {KEY: [0.3, 0.2, 0.25, 0.21]}).reason == \
        "k/exploitability: no new best (min) in 2 evaluations; best 0.2, last 0.21 (train.stop_when.0)"


def test_the_watch_reads_rows_and_a_resumed_runs_metrics(tmp_path: Path) -> None:
    rules = [rule(patience=2, mode="min")]
    watch = StopWatch(rules)
    assert watch.update({"step": 1, "loss": 1.0}) is None and watch.history[KEY] == []  # no eval in the row
    assert watch.update({"step": 0, KEY: 0.3}) is None
    assert watch.update({"step": 2, KEY: 0.31}) is None
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps(r) for r in ({"step": 0, KEY: 0.3}, {"step": 2, KEY: 0.31}))
                       + '\n{"step": 3, "eval/k/expl')  # a row cut short by a kill
    resumed = StopWatch(rules, metrics)
    assert resumed.history[KEY] == [0.3, 0.31]
    assert resumed.update({"step": 4, KEY: None}).rule == 0  # logged as null (NaN): no improvement


@pytest.mark.parametrize(("value", "says"), [
    ({"<=": 0.1, "patience": 2, "mode": "min"}, 'give exactly one of "<=", ">=", patience (got "<=", patience)'),
    ({}, 'give exactly one of "<=", ">=", patience (got none)'),
    ({"patience": 2}, "mode (min or max) goes with patience"),
    ({"<=": 0.1, "mode": "min"}, "mode (min or max) goes with patience"),
    ({"<=": 0.1, "min_delta": 0.1}, "min_delta goes with patience only"),
    ({"patience": 0, "mode": "min"}, "patience: Input should be greater than or equal to 1 (got 0)"),
    ({"patience": 1, "mode": "least"}, "mode: Input should be 'min' or 'max'"),
    ({"<": 0.1}, "<: unknown key"),
])
def test_malformed_rules_are_one_line(value, says: str) -> None:
    value = {"metric": "exploitability/exploitability", **value}
    with pytest.raises(ConfigError) as e:
        load_config(KUHN, [f"train.stop_when=[{json.dumps(value)}]"])
    assert "train.stop_when.0" in str(e.value) and says in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize(("metric", "says"), [
    ("exploitability/exploitabilty", "train.stop_when.0.metric: evaluation 'exploitability' logs no metric "
     "'exploitabilty'; valid: exploitability/exploitability, exploitability/exploitability_cfr, "
     "exploitability/exploitability_uniform, exploitability/nash_conv, "),
    ("kuhn/exploitability", "train.stop_when.0.metric: 'kuhn/exploitability' names no evaluation; write "
     "'<eval name>/<metric>' with an evaluation of train.evals: exploitability"),
    ("exploitability", "evaluation 'exploitability' needs a metric after it ('<eval name>/<metric>'); valid: "),
])
def test_a_metric_no_evaluation_logs_is_one_line(metric: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(KUHN, [f"train.stop_when=[{{metric: {metric}, '<=': 0.05}}]"])
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_metrics_of_played_evaluations_and_the_eval_prefix_are_accepted() -> None:
    sets = ["train.evals=[{name: exploitability, kind: exact}, {name: play, games: 2, metrics: [invalid_rate]}]"]
    cfg = load_config(KUHN, [*sets, "train.stop_when=[{metric: eval/exploitability/exploitability, '<=': 0.05}, "
                                    "{metric: play/invalid_rate_hi, patience: 2, mode: min}]"])
    assert [r.key for r in cfg.train.stop_when] == ["eval/exploitability/exploitability", "eval/play/invalid_rate_hi"]
    with pytest.raises(ConfigError, match="evaluation 'play' logs no metric 'moves'; valid: play/invalid_rate, "):
        load_config(KUHN, [*sets, "train.stop_when=[{metric: play/moves, '>=': 2}]"])


def test_the_cli_exits_2_with_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "arena.train", str(KUHN), "--set",
                          "train.stop_when=[{metric: exploitability/exploitabilty, '<=': 0.05}]"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=os.environ | {"OMP_NUM_THREADS": "1"})
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "train.stop_when.0.metric: evaluation 'exploitability' logs no metric 'exploitabilty'" in out.stderr


# ------------------------------------------------------------------ a run that stops (tiny model)
@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer model with SmolLM2's tokenizer (as tests/test_league.py's tiny_model)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from arena.core.models import resolve_model

    source = resolve_model("smollm2-135m")
    cfg = AutoConfig.from_pretrained(source)
    cfg.update({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 8})
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny") / "model"
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def test_tiny_model_run_stops_checkpoints_and_says_why(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    """The uniform reference point never improves: patience 1 stops the run at its first evaluation
    after step 0 (step 2 of 6), which is checkpointed; stdout and stopped.json say why."""
    from arena.loop.checkpoint import list_checkpoints
    from arena.loop.trainer import Trainer

    cfg = load_config(KUHN, [f"policies.learner.model={tiny_model_dir}", "runner.num_envs=2", "runner.progress=false",
                             "train.games_per_step=2", "train.steps=6", "train.checkpoint_every=4", "train.plot=false",
                             "train.loggers=[]", "train.sync_canary_max_gap=null",
                             "train.evals=[{name: exploitability, kind: exact, every: 2}]",
                             "train.stop_when=[{metric: exploitability/exploitability, '<=': 0.0}, "
                             "{metric: exploitability/exploitability_uniform, patience: 1, mode: min}]"])
    rows = Trainer(cfg, tmp_path).run()
    assert [r["step"] for r in rows] == [1, 2]
    stopped = json.loads((tmp_path / "stopped.json").read_text())
    assert stopped["step"] == 2 and stopped["rule"] == 1 and stopped["metric"] == "exploitability/exploitability_uniform"
    assert stopped["value"] == pytest.approx(0.4583333, abs=1e-6)
    assert "no new best (min) in 1 evaluations" in stopped["reason"]
    assert f"stopped at step 2: {stopped['reason']}" in capsys.readouterr().out
    assert [int(p.name.split("_")[-1]) for p in list_checkpoints(tmp_path)] == [2]


def test_the_reason_names_the_best_that_counted() -> None:
    """With min_delta, the best is the last value that beat the one before by more than min_delta."""
    stop = decide([rule(patience=2, mode="min", min_delta=0.05)], {KEY: [0.5, 0.46, 0.455]})
    assert stop is not None and "best 0.5, last 0.455" in stop.reason
