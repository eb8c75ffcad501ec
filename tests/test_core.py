"""The core serves games beyond SpyRL (slow: the built-in model).

The quiz test game (``tests/fixtures/quiz.py``) has three phases, a referee seat
scored by a reward model built here (a classification head on the built-in
model, saved to a temp folder), a frozen judge with its own greedy sampling and
stop string, outcomes, and a question library that lives across episodes. It
trains for 2 steps; the library changes between steps and ``--resume`` restores
it exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena.core.types import read_jsonl
from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything
from arena.policies.base import Request, SamplingParams
from tolerance import approx32, scale_of

ROOT = Path(__file__).resolve().parents[1]
QUIZ = ROOT / "tests" / "fixtures" / "quiz.yaml"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from arena.core.models import resolve_model

    base = resolve_model("smollm2-135m")
    torch.manual_seed(0)  # the head is freshly initialised: seed it so scores are stable
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model.config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out = tmp_path_factory.mktemp("tiny-rm")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _library(run: Path, step: int) -> dict:
    return json.loads((run / "checkpoints" / f"step_{step:06d}" / "game_state" / "library.json").read_text())


def _rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def test_quiz_trains_with_a_referee_a_frozen_judge_and_state(tmp_path: Path, tiny_rm: Path) -> None:
    cfg = load_config(QUIZ, [f"policies.rm.model={tiny_rm}"])
    straight = tmp_path / "straight"
    seed_everything(0)
    trainer = Trainer(cfg, straight)
    # One frozen copy of the built-in model serves the judge's seat and the KL reference.
    assert trainer.learner.ref_model is trainer.policies["judge"].model  # type: ignore[attr-defined]
    rows = trainer.run()
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["samples"] > 0 and rows[1]["samples"] > 0
    assert rows[1]["state/updates"] == 2.0

    lib1, lib2 = _library(straight, 1), _library(straight, 2)
    assert lib1["updates"] == 1 and lib2["updates"] == 2 and lib1["questions"] != lib2["questions"]

    episodes = list(read_jsonl(straight / "episodes.jsonl"))
    assert len(episodes) == 4
    judge, rm = trainer.policies["judge"], trainer.policies["rm"]
    for ep in episodes:
        assert [t.phase for t in ep.turns] == ["ask", "answer", "answer", "review", "review", "review"]
        assert {s: o.rank for s, o in ep.outcome.items()}  # every seat has an outcome
        j = ep.turns_of(seat="judge_0")[0]
        assert j.policy == "judge" and len(j.completion_ids) <= 3 and "\n" not in j.completion
        # The judge really sampled greedily with its own budget and stop string.
        (again,) = judge.generate([Request(messages=j.messages, params=SamplingParams(temperature=0, max_new_tokens=3, stop=("\n",)))])
        assert again.text == j.completion
        for k in range(2):
            ref = ep.turns_of(seat=f"referee_{k}")[0]
            assert ref.policy == "rm" and ref.valid and not ref.completion_ids
            (score,) = rm.generate([Request(messages=ref.messages)])
            assert score.score == approx32(float(ref.completion))
            assert ep.rewards[f"solver_{k}"] == pytest.approx(float(ref.completion))
        assert ep.rewards["asker_0"] == pytest.approx(-(ep.rewards["solver_0"] + ep.rewards["solver_1"]) / 2)
    # Step 2's askers were shown step 1's questions (the frozen snapshot of the library).
    step1_questions = lib1["questions"]
    assert all(q in episodes[2].turns[0].messages[-1]["content"] for q in step1_questions)

    # Resume from the straight run's step-1 checkpoint into a fresh folder (a fork of the run: the same
    # code path as --resume, without replaying step 1), then step 2 must match the straight run's.
    resumed = tmp_path / "resumed"
    seed_everything(1)  # the checkpoint's RNG state, not this, must decide step 2
    again = Trainer(cfg, resumed, resume=straight / "checkpoints" / "step_000001")
    state = again.feature("game_state").state
    assert state.questions == lib1["questions"] and state.updates == 1
    again.run()
    assert _library(resumed, 2) == lib2
    (want,), (got,) = _rows(straight)[1:], _rows(resumed)
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, float):
            assert got[key] == approx32(value, scale=scale_of(value, 1.0)), key
        else:
            assert got[key] == value, key
