"""The built-in model on OpenSpiel's games: Kuhn, Leduc and tic-tac-toe play through ``arena.play``, and on Kuhn ``arena.eval
exploitability`` prints its exact exploitability (slow: loads the real model)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tolerance import approx32, approx64

ROOT = Path(__file__).resolve().parents[2]
KUHN = str(ROOT / "arena" / "games" / "openspiel" / "kuhn.yaml")

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("config", "sets", "legal"), [
    (KUHN, ["game.invalid.mode=na"], "Legal actions: Pass, Bet."),  # na: zero-sum returns (kuhn.yaml penalises)
    (str(ROOT / "arena" / "games" / "openspiel" / "leduc.yaml"), [], "Legal actions:"),
    (str(ROOT / "arena" / "games" / "openspiel" / "openspiel.yaml"), ["game.game=tic_tac_toe", "policies.learner.sampling.max_new_tokens=4"],
     "Legal actions:"),
])
def test_builtin_model_plays_through_arena_play(config: str, sets: list[str], legal: str, tmp_path: Path, capsys) -> None:
    from arena.core.types import read_jsonl
    from arena.play import main

    out = tmp_path / "games.jsonl"
    argv = [config, "--episodes", "1" if "kuhn" not in config else "2", "--jsonl", str(out),
            "--set", "policies.learner.dtype=float32"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0
    episodes = list(read_jsonl(out))
    assert episodes and all(ep.outcome for ep in episodes)
    for ep in episodes:
        assert sum(ep.rewards.values()) == pytest.approx(0.0)
        assert all(t.policy == "learner" and t.completion_ids for t in ep.turns)
    assert legal in capsys.readouterr().out


def test_eval_exploitability_prints_a_number_for_the_builtin_model(capsys) -> None:
    from arena.rank.eval import main

    assert main(["exploitability", KUHN, "--set", "policies.learner.dtype=float32"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("seats' policy"))
    value, nash_conv = float(row.split()[2]), float(row.split()[3])
    assert 0.0 <= value <= 2.0 and nash_conv == approx64(2 * value)
    assert "0.458333" in out  # the uniform reference beside it


def test_model_action_probs_are_the_normalised_teacher_forced_likelihoods(smol_fp32) -> None:
    """arena/loop/exact.py against the policy's own scoring, at two temperatures."""
    from arena.loop.exact import action_ids, model_action_probs
    from arena.games.openspiel import OpenSpielGame
    from arena.games.openspiel.exact import ActionQuery
    from arena.games.openspiel.env import render
    from arena.policies.base import Request, SamplingParams

    env = OpenSpielGame()
    env.reset(seed=0)
    obs = env.observe(env.agent_selection)
    query = ActionQuery(seat=env.agent_selection, messages=render(obs), observation=obs, actions=obs.legal)
    results = {}
    for temperature in (1.0, 0.5):
        params = SamplingParams(temperature=temperature, max_new_tokens=6)
        probs = model_action_probs(smol_fp32, query, params)
        prompt = smol_fp32.encode(Request(messages=query.messages))
        logps = [sum(smol_fp32.score(prompt, action_ids(smol_fp32.tokenizer, a), params)) for a in obs.legal]
        expected = [math.exp(lp) / sum(math.exp(x) for x in logps) for lp in logps]
        assert probs == approx32(expected) and sum(probs) == pytest.approx(1.0)
        results[temperature] = probs
    assert max(results[0.5]) >= max(results[1.0])  # a lower temperature sharpens the choice
