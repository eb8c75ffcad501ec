"""The pairwise win-rate evaluation (arena/rank/pairwise.py): parsing, scoring, data, and a run with scripted policies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given

from arena.rank.pairwise import (
    DEFAULT_DATA,
    Instruction,
    compare,
    judge_messages,
    load_instructions,
    main,
    pair_score,
    parse_verdict,
)
from arena.testing import completions
from arena.policies.base import Completion, Request, SamplingParams


class Answerer:
    """A scripted policy that answers every request with a fixed text."""

    def __init__(self, text: str, name: str):
        self.text, self.name = text, name

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [Completion(text=self.text) for _ in requests]


class LongerJudge:
    """A scripted judge that names the longer response, or always (a) when ``biased``."""

    name = "judge"

    def __init__(self, biased: bool = False):
        self.biased = biased
        self.seen: list[str] = []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for r in requests:
            text = r.messages[-1]["content"]
            self.seen.append(text)
            a = text.split("## Response (a)\n", 1)[1].split("\n\n## Response (b)", 1)[0]
            b = text.split("## Response (b)\n", 1)[1].split("\n\nWhich response", 1)[0]
            out.append(Completion(text="Output (a)" if self.biased or len(a) >= len(b) else "Output (b)"))
        return out


def test_verdict_parsing() -> None:
    assert parse_verdict("Output (a)") == "a"
    assert parse_verdict("I think (A) is fine but Output (b)") == "b"
    assert parse_verdict("b") == "b" and parse_verdict("Output: a.") == "a"
    assert parse_verdict("both are bad") is None and parse_verdict("") is None


@given(completions())
def test_any_judge_text_gives_a_verdict_or_none(text: str) -> None:
    assert parse_verdict(text) in ("a", "b", None)


def test_pair_score_cancels_position() -> None:
    assert pair_score("a", "b") == 1.0  # candidate is (a), then (b): won both
    assert pair_score("b", "a") == 0.0
    assert pair_score("a", "a") == 0.5  # a judge that always says (a) gives a tie
    assert pair_score(None, "b") == 0.75


def test_shipped_instructions_and_the_jsonl_loader(tmp_path: Path) -> None:
    shipped = load_instructions()
    assert len(shipped) == 100 and len({x.id for x in shipped}) == 100
    assert len({x.instruction for x in shipped}) == 100 and DEFAULT_DATA.is_file()
    assert load_instructions(limit=5) == shipped[:5]
    path = tmp_path / "mine.jsonl"
    path.write_text('{"instruction": "Say hi."}\n\n{"id": "x", "instruction": "Count to 3."}\n')
    assert load_instructions(path) == [Instruction("mine-1", "Say hi."), Instruction("x", "Count to 3.")]
    path.write_text('{"prompt": "no instruction key"}\n')
    with pytest.raises(ValueError, match="mine.jsonl:1"):
        load_instructions(path)
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        load_instructions(path)


def test_judge_prompt_holds_both_answers_in_order() -> None:
    text = judge_messages("Q?", "first {a}", "second")[0]["content"]
    assert text.index("first {a}") < text.index("second") and "Q?" in text


def test_compare_judges_both_orders() -> None:
    data = load_instructions(limit=10)
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    judge = LongerJudge()
    summary, records = compare(data, Answerer("a long and careful answer", "c"), Answerer("short", "b"), judge, params, params)
    assert summary["win_rate"] == 1.0 and summary["low"] == summary["high"] == 1.0
    assert len(judge.seen) == 20 and summary["a_rate"] == 0.5 and summary["unparseable_rate"] == 0.0
    assert all(r["verdicts"] == ["a", "b"] for r in records)
    summary, _ = compare(data, Answerer("x", "c"), Answerer("yy", "b"), LongerJudge(biased=True), params, params)
    assert summary["win_rate"] == 0.5 and summary["a_rate"] == 1.0  # position bias cancels out


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.cli import run_cli
    from arena.rank.eval import main as eval_main

    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: eval_main(["pairwise", "games/lsp/lsp.yaml", "--base", "nope", "--judge", "judge"]))
    assert exit_info.value.code == 2 and "--base: unknown policy 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("[1]\n")
    with pytest.raises(SystemExit):
        run_cli(lambda: main(["games/lsp/lsp.yaml", "--base", "judge", "--judge", "judge", "--data", str(bad)]))
    assert "bad.jsonl:1" in capsys.readouterr().err
    assert json.loads(DEFAULT_DATA.read_text().splitlines()[0])["id"] == "arena-000"
