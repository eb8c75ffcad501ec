"""LSP with a real (tiny) reward model: the built-in model's body with a one-label head, saved to a
temp folder and loaded by path through the reward-model policy (slow: loads SmolLM2-135M)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from arena.runner import Runner, SeatMap
from arena.games.lsp import LspGame
from arena.games.lsp.rules import parse_reward
from arena.policies.base import SamplingParams

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from arena.core.models import resolve_model

    base = resolve_model("smollm2-135m")
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    torch.nn.init.normal_(model.score.weight, std=0.05, generator=torch.Generator().manual_seed(0))
    folder = tmp_path_factory.mktemp("lsp-rm")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


def test_tiny_reward_model_referees_lsp(tiny_rm: Path, smol_fp32) -> None:
    from arena.policies.reward_model import RewardModelPolicy

    rm = RewardModelPolicy(str(tiny_rm), max_batch_size=8, max_length=256, name="rm")
    seats = SeatMap({"reward_*": "rm", "judge_*": "judge", "*": "learner"})
    sampling = {
        "learner": SamplingParams(temperature=1.0, max_new_tokens=8),
        "judge": SamplingParams(temperature=0.0, max_new_tokens=8, stop=("</Score>",)),
    }
    runner = Runner(
        lambda: LspGame(mode="lsp", n_solvers=2, query_format="lenient"),
        {"learner": smol_fp32, "judge": smol_fp32, "rm": rm}, seats, sampling, num_envs=2,
    )
    episodes = runner.play([0, 1])
    answered = [ep for ep in episodes if ep.info["query"]]
    assert answered, "the lenient format reads a query from any non-empty first line"
    for ep in answered:
        r = {t.seat.split("_")[1]: parse_reward(t.completion) for t in ep.turns if t.role == "reward"}
        assert len(r) == 2 and all(v is not None and math.isfinite(v) for v in r.values())
        r_q = {t.seat.split("_")[1]: ep.rewards[f"solver_{t.seat.split('_')[1]}"] - r[t.seat.split("_")[1]]
               for t in ep.turns if t.role == "judge"}
        assert all(k == int(k) and 0 <= k <= 7 for k in r_q.values())
        v, v_q = sum(r.values()) / 2, sum(r_q.values()) / 2
        assert ep.rewards["challenger_0"] == pytest.approx(-v + v_q)
        assert ep.metrics["rm_unparseable_rate"] == 0.0
        assert {t.policy for t in ep.turns if t.role == "reward"} == {"rm"}
