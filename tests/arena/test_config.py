"""Bad configuration fails at start-up with one line naming the field, the value and what is valid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.loop.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SPY_YAML = ROOT / "arena" / "games" / "spy" / "spy.yaml"
LSP_YAML = ROOT / "arena" / "games" / "lsp" / "lsp.yaml"


def _bad_yaml(tmp_path: Path, replace: str, by: str) -> Path:
    text = SPY_YAML.read_text()
    assert replace in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(replace, by, 1))
    return path


@pytest.mark.parametrize("name", ["spy.yaml", "spy.paper.yaml"])
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(ROOT / "arena" / "games" / "spy" / name)
    assert cfg.game.name == "spy"
    assert cfg.game.settings.n_players in (3, 5)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("  name: spy\n", "  name: spy\n  betta: 0.2\n", "game.betta: unknown key"),
        ("  name: spy\n", "  name: spy\n  mask_ratio: 1.5\n", "game.mask_ratio: Input should be less than 1 (got 1.5)"),
        ("n_players: 3", "n_players: 1", "game.n_players: Input should be greater than or equal to 3 (got 1)"),
        ("task: math", "task: poetry", "game.task: Input should be 'summary', 'story' or 'math' (got 'poetry')"),
        ("name: spy", "name: spyy", "game.name: unknown game 'spyy'; known: "),  # the list grows with the games
        ("seats:", "plya: {}\nseats:", "plya: unknown key"),
        ("  lr: 2.0e-5", "  lr: -1", "learner.lr: Input should be greater than 0 (got -1)"),
        ('"*": learner', '"*": lerner', "seats.*: unknown policy 'lerner'; known: learner, human, scripted:<bot>"),
        ("    rule: cycle", "    rule: sometimes", "train.schedule.rule: "),
        ("      max_new_tokens: 32", "      max_new_tokens: 32\n      temperature: -1", "policies.learner.sampling.temperature: Input should be greater than or equal to 0 (got -1)"),
        ("    backend: vllm ", "    backend: tgi ", "policies.learner.backend: Input should be 'hf', 'vllm' or 'openai' (got 'tgi')"),
        ("    vote: {name: grpo", "    vote: {name: grpoo", "learner.estimators.vote.name: unknown estimator 'grpoo'"),
        ("    vote: {name: grpo", "    votes: {name: grpo", "learner.estimators.votes: the game has no phase 'votes'; its phases: perform, vote"),
        ("stages: [[vote], [perform]]", "stages: [[vote], [perfrom]]", "train.schedule: the game has no phase 'perfrom'"),
    ],
)
def test_bad_yaml_one_line_naming_the_field(tmp_path: Path, replace: str, by: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_bad_yaml(tmp_path, replace, by))
    message = str(err.value)
    assert "\n" not in message
    assert expected in message, message


def test_set_overrides_and_their_errors() -> None:
    cfg = load_config(SPY_YAML, ["game.n_players=4", "game.task=math"])
    assert cfg.game.settings.n_players == 4  # type: ignore[attr-defined]
    cfg = load_config(SPY_YAML, ["game.n_players=6", "learner.lr=3e-6", "train.schedule={rule: joint}"])
    assert cfg.game.settings.n_players == 6 and cfg.learner.lr == 3e-6  # type: ignore[attr-defined]
    assert cfg.train.schedule.rule == "joint"
    with pytest.raises(ConfigError, match=r"game.n_players: Input should be a valid integer"):
        load_config(SPY_YAML, ["game.n_players=many"])
    with pytest.raises(ConfigError, match=r"expected KEY=VALUE"):
        load_config(SPY_YAML, ["game.n_players"])


def test_set_empty_value_is_the_empty_string_and_null_is_none() -> None:
    cfg = load_config(LSP_YAML, ["game.challenger_prefix="])
    assert cfg.game.settings.challenger_prefix == ""  # type: ignore[attr-defined]
    cfg = load_config(LSP_YAML, ["game.challenger_prefix=''"])
    assert cfg.game.settings.challenger_prefix == ""  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"game.challenger_prefix: Input should be a valid string"):
        load_config(LSP_YAML, ["game.challenger_prefix=null"])


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text("game: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")


def test_cli_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = _bad_yaml(tmp_path, "n_players: 3", "n_players: 1")
    proc = subprocess.run(
        [sys.executable, "-m", "arena.play", str(path), "--policy", "scripted"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "game.n_players" in lines[0], proc.stderr


def test_policy_table_defaults_and_shorthands() -> None:
    cfg = load_config(SPY_YAML)
    assert cfg.trainable == "learner" and cfg.seat_table() == {"*": "learner"}
    assert cfg.run_dir == "runs/spy"
    cfg = load_config(SPY_YAML, ["seats={player_0: human, '*': 'scripted:copycat'}"])
    assert cfg.policy_spec("scripted:copycat").bot == "copycat"  # type: ignore[union-attr]
    params = load_config(SPY_YAML, ["policies.learner.phase_sampling={vote: {max_new_tokens: 8, stop: [x]}}"])
    spec = params.policies["learner"]
    assert spec.params_for("vote").max_new_tokens == 8 and spec.params_for("vote").stop == ("x",)
    assert spec.params_for("perform").max_new_tokens == 32 and spec.params_for("perform").stop == ()
    with pytest.raises(ConfigError, match=r"policies.learner.phase_sampling.votes: the game has no phase 'votes'"):
        load_config(SPY_YAML, ["policies.learner.phase_sampling={votes: {max_new_tokens: 8}}"])
    with pytest.raises(ConfigError, match=r"policies.judge.kind: must be one of model, reward_model, scripted, human"):
        load_config(SPY_YAML, ["policies.judge={kind: oracle}"])
    # Several trainable policies are allowed (tests/test_several_policies.py); a learner section needs one.
    assert load_config(SPY_YAML, ["policies.other={trainable: true}"]).trainables == ["learner", "other"]
    with pytest.raises(ConfigError, match=r"policies.other.learner: only a trainable policy has a learner"):
        load_config(SPY_YAML, ["policies.other={learner: {lr: 0.1}}"])


def test_a_game_name_loads_its_own_yaml() -> None:
    assert load_config("spy").game.name == "spy"


def test_unreadable_data_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"game.data_path: no such file '/nope/x.jsonl' \(got '/nope/x.jsonl'\)"):
        load_config(SPY_YAML, ["game.task=summary", "game.data_path=/nope/x.jsonl"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n')
    with pytest.raises(ConfigError, match=r"game.data_path: cannot read .*line 1.*text"):
        load_config(SPY_YAML, ["game.task=summary", f"game.data_path={bad}"])


def test_a_cross_field_error_names_its_fields_without_dumping_the_section() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(SPY_YAML, ["game.min_words=600", "game.max_words=100"])
    assert str(err.value).endswith("game: min_words (600) must not exceed max_words (100)")
    assert "{" not in str(err.value)


def test_openai_retry_settings_reach_the_policy() -> None:
    from arena.loop.build import ModelStore, make_model_policy

    server = "policies.judge={backend: openai, base_url: 'http://127.0.0.1:9', model: smollm2-135m, retries: 4, backoff_s: 0.25}"
    cfg = load_config(SPY_YAML, [server])
    policy = make_model_policy(cfg.policies["judge"], "judge", ModelStore())  # type: ignore[arg-type]
    assert (policy.retries, policy.backoff_s) == (4, 0.25)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"policies.judge.backoff_s: Input should be greater than or equal to 0 \(got -1\)"):
        load_config(SPY_YAML, [server.replace("0.25", "-1")])
