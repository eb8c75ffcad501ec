"""train.stop_when (arena/loop/components/stop.py, issue #34): one-line config errors at start-up (exit 2), and a real
run on a tiny model that stops, checkpoints and says why. The decision's hand cases:
tests/arena/test_stop_values.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config
from tolerance import approx64

ROOT = Path(__file__).resolve().parents[1]
KUHN = ROOT / "arena/games/openspiel/kuhn.yaml"


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
     "exploitability/exploitability_played, exploitability/exploitability_uniform, "
     "exploitability/invalid_rate_played, exploitability/legal_mass_mean, exploitability/legal_mass_min, "
     "exploitability/nash_conv, "),
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
def test_tiny_model_run_stops_checkpoints_and_says_why(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    """The uniform reference point never improves: patience 1 stops the run at its first evaluation
    after step 0 (step 2 of 6), which is checkpointed; stdout and stopped.json say why."""
    from arena.loop.checkpoint import list_checkpoints
    from arena.loop.trainer import Trainer

    cfg = load_config(KUHN, [f"policies.learner.model={tiny_model_dir}", "runner.num_envs=2", "runner.progress=false",
                             "train.games_per_step=2", "train.steps=6", "train.checkpoint_every=4", "train.plot=false",
                             "train.loggers=[]", "train.canary.max_gap=null",
                             "train.evals=[{name: exploitability, kind: exact, every: 2}]",
                             "train.stop_when=[{metric: exploitability/exploitability, '<=': 0.0}, "
                             "{metric: exploitability/exploitability_uniform, patience: 1, mode: min}]"])
    rows = Trainer(cfg, tmp_path).run()
    assert [r["step"] for r in rows] == [1, 2]
    stopped = json.loads((tmp_path / "stopped.json").read_text())
    assert stopped["step"] == 2 and stopped["rule"] == 1 and stopped["metric"] == "exploitability/exploitability_uniform"
    assert stopped["value"] == approx64(11 / 24)
    assert "no new best (min) in 1 evaluations" in stopped["reason"]
    assert f"stopped at step 2: {stopped['reason']}" in capsys.readouterr().out
    assert [int(p.name.split("_")[-1]) for p in list_checkpoints(tmp_path)] == [2]

