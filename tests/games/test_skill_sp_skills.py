"""Skill-SP's seed library: tools that really execute, exact checkers, and the package loader."""

from __future__ import annotations

import copy
import json
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.core.game_types import Invalid
from arena.games.skill_sp import tools
from arena.games.skill_sp.loader import (
    SKILLS_DIR,
    SkillPackage,
    examples_jobs,
    load_library,
    load_skill,
    parse_skill,
    save_skill,
)
from arena.games.skill_sp.sandbox import Job, Sandbox, SandboxPool, Status
from test_skill_sp_controller import ROOMY  # same folder (pytest puts it on sys.path)

LIB = load_library()


def validators_of(pkg: SkillPackage, monkeypatch) -> types.ModuleType:
    """The package's validators imported in-process (they are our own code; the sandbox path is tested below)."""
    monkeypatch.setitem(sys.modules, "tools", tools)
    module = types.ModuleType(f"validators_{pkg.name}")
    exec(compile(pkg.validators, f"{pkg.name}/validators.py", "exec"), module.__dict__)  # noqa: S102
    return module


def reference(pkg: SkillPackage, contract: dict):
    return contract["calls"] if pkg.kind == "tool_use" else contract["answer"]


# ------------------------------------------------------------------ the library
def test_seed_library_has_both_kinds():
    kinds = [p.kind for p in LIB.values()]
    assert kinds.count("tool_use") >= 8 and kinds.count("logic") >= 4
    used = {t for p in LIB.values() for t in p.tools}
    assert len(used) >= 10 and used <= set(tools.TOOLS)


@pytest.mark.parametrize("name", sorted(LIB))
def test_examples_pass_their_validators_and_checkers(name, monkeypatch):
    pkg = LIB[name]
    v = validators_of(pkg, monkeypatch)
    for ex in pkg.examples:
        assert v.validate(ex.contract) == [], (name, ex.prompt)
        assert v.check(ex.contract, reference(pkg, ex.contract)) is True
        assert v.check(ex.contract, "nonsense") is False
        assert v.check(ex.contract, None) is False
        wrong = copy.deepcopy(ex.contract)
        wrong["answer"] = "definitely not the answer"
        assert v.validate(wrong) != []  # a contract whose answer is wrong is rejected
        assert v.validate({}) != [] and v.validate("text") != []


def test_examples_validate_inside_the_sandbox():
    """The path the game uses: every seed example's contract, validated by its package in the sandbox."""
    jobs = [job for pkg in LIB.values() for job in examples_jobs(pkg)]
    pkg = LIB["arithmetic"]
    bad = copy.deepcopy(pkg.examples[0].contract)
    bad["answer"] = 22
    jobs.append(Job(files=pkg.sandbox_files(), module="validators", function="validate", kwargs={"contract": bad}))
    with SandboxPool(Sandbox(ROOMY), workers=4) as pool:
        results = pool.map(jobs)
    assert all(r.status is Status.OK for r in results), [r for r in results if not r.ok][:2]
    assert [r.value for r in results[:-1]] == [[]] * (len(jobs) - 1)
    assert results[-1].value == ["reference calls give 21.5, not the answer 22"]


# ------------------------------------------------------------------ logic checkers are exact
def test_dropping_a_clue_makes_puzzles_ambiguous(monkeypatch):
    for name, key in [("zebra_houses", "clues"), ("seating_order", "constraints")]:
        pkg = LIB[name]
        v = validators_of(pkg, monkeypatch)
        contract = copy.deepcopy(pkg.examples[0].contract)
        contract[key] = contract[key][1:]
        assert v.validate(contract) == [
            "the clues allow more than one solution" if name == "zebra_houses" else "the constraints allow more than one order"
        ]


def test_knights_and_knaves_paradox_and_ambiguity(monkeypatch):
    v = validators_of(LIB["knights_knaves"], monkeypatch)
    liar = {"people": ["A", "B"], "statements": {"A": {"is": ["A", "knave"]}}, "answer": {"A": "knight", "B": "knight"}}
    assert v.validate(liar) == ["the statements allow 0 solutions, not one"]
    vague = {"people": ["A", "B"], "statements": {"A": {"is": ["A", "knight"]}}, "answer": {"A": "knight", "B": "knight"}}
    assert v.validate(vague) == ["the statements allow 4 solutions, not one"]


def test_sudoku_uniqueness(monkeypatch):
    v = validators_of(LIB["mini_sudoku"], monkeypatch)
    contract = copy.deepcopy(LIB["mini_sudoku"].examples[0].contract)
    contract["grid"] = [[0] * 4 for _ in range(4)]
    assert v.validate(contract) == ["the givens allow more than one completion"]
    contract = copy.deepcopy(LIB["mini_sudoku"].examples[0].contract)
    contract["answer"][0][0], contract["answer"][0][1] = contract["answer"][0][1], contract["answer"][0][0]
    assert v.validate(contract) != []


# ------------------------------------------------------------------ tools and the call format
def test_tool_calls_execute_and_chain():
    calls = [
        {"tool": "calculate", "args": {"expression": "(3 + 4) * 6"}},
        {"tool": "convert_units", "args": {"value": "$0", "from_unit": "min", "to_unit": "h"}},
    ]
    assert tools.run_calls(json.dumps(calls)) == {"value": 0.7, "results": [42, 0.7]}
    assert tools.run_calls({"tool": "date_diff", "args": {"start": "2024-02-28", "end": "2024-03-01"}})["value"] == 2
    assert tools.run_calls({"tool": "weekday", "args": {"date": "2000-01-01"}})["value"] == "Saturday"
    assert tools.run_calls({"tool": "convert_base", "args": {"number": "-ff", "from_base": 16, "to_base": 2}})[
        "value"
    ] == "-11111111"
    assert tools.run_calls({"tool": "convert_units", "args": {"value": 100, "from_unit": "C", "to_unit": "K"}})[
        "value"
    ] == 373.15


@pytest.mark.parametrize(
    "response",
    [
        "not json", "[]", "{}", [{"tool": "rm", "args": {}}], {"tool": "calculate", "args": {"expression": "2 **"}},
        {"tool": "calculate", "args": {"expression": "__import__('os')"}}, {"tool": "calculate", "args": {"expression": "9**99"}},
        {"tool": "calculate", "args": {"expression": "1/0"}}, {"tool": "calculate", "args": {"x": 1}},
        [{"tool": "list_op", "args": {"items": "$1", "op": "sort"}}], {"tool": "convert_units", "args": {"value": 1, "from_unit": "kg", "to_unit": "km"}},
        {"tool": "json_get", "args": {"document": "{", "path": "a"}}, {"tool": "regex_findall", "args": {"pattern": "(", "text": ""}},
        {"tool": "date_add", "args": {"date": "9999-12-31", "days": 1}}, {"tool": "describe", "args": {"numbers": [1], "stat": "stdev"}},
        {"tool": "list_op", "args": {"items": [], "op": "first"}}, [{"tool": "calculate", "args": {"expression": "1"}}] * 9,
    ],
)  # fmt: skip
def test_bad_calls_are_errors_not_exceptions(response):
    assert "error" in tools.run_calls(response)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, width=32) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(tool=st.sampled_from(sorted(tools.TOOLS)), args=st.dictionaries(st.sampled_from(
    ["expression", "value", "from_unit", "to_unit", "date", "days", "start", "end", "text", "op", "sub", "old",
     "new", "pattern", "items", "numbers", "stat", "document", "path", "number", "from_base", "to_base"]), json_values))
def test_any_arguments_never_raise(tool, args):  # fmt: skip
    result = tools.run_calls({"tool": tool, "args": args})
    assert set(result) in ({"error"}, {"value", "results"})
    json.dumps(result)  # always JSON


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | json_values)
def test_any_response_never_raises(response):
    assert "error" in tools.run_calls(response) or "value" in tools.run_calls(response)


# ------------------------------------------------------------------ the loader
def test_round_trip_through_files(tmp_path):
    for pkg in LIB.values():
        folder = save_skill(pkg, tmp_path)
        assert load_skill(folder) == pkg
        assert parse_skill(pkg.skill_md(), pkg.validators) == pkg


GOOD = LIB["arithmetic"]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda md, v: ("no front matter\n" + md, v), "front matter"),
        (lambda md, v: (md.replace("name: arithmetic", "name: [unclosed"), v), "YAML"),
        (lambda md, v: (md.replace("## Generation hints", "## Other"), v), "Generation hints"),
        (lambda md, v: (md.replace('{"answer": 21.5', '{"answer: 21.5'), v), "not JSON"),
        (lambda md, v: (md.replace("kind: tool_use", "kind: magic"), v), "kind"),
        (lambda md, v: (md.replace("- calculate", "- rm_rf"), v), "unknown tool"),
        (lambda md, v: (md.replace("name: arithmetic", "name: Bad Name"), v), "name"),
        (lambda md, v: (md, "import os\n" + v), "imports 'os'"),
        (lambda md, v: (md, "from subprocess import run\n" + v), "imports 'subprocess'"),
        (lambda md, v: (md, v.replace("def check(contract, response)", "def judge(contract, response)")), "check("),
        (lambda md, v: (md, "def validate(:\n"), "does not parse"),
        (lambda md, v: (md.replace("kind: tool_use", "kind: logic"), v), "logic skill uses no tools"),
    ],
)
def test_structurally_broken_packages_are_invalid(mutate, reason):
    md, v = mutate(GOOD.skill_md(), GOOD.validators)
    result = parse_skill(md, v)
    assert isinstance(result, Invalid) and reason in result.reason, result


def test_folder_name_must_match(tmp_path):
    folder = save_skill(GOOD, tmp_path)
    moved = folder.rename(tmp_path / "other_name")
    assert isinstance(load_skill(moved), Invalid)
    assert isinstance(load_skill(tmp_path / "missing"), Invalid)


def test_seed_skills_dir_is_the_library():
    assert sorted(LIB) == sorted(p.name for p in SKILLS_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))


@settings(max_examples=200, deadline=None)
@given(md=st.text(max_size=300), v=st.text(max_size=100))
def test_any_text_parses_or_is_invalid(md, v):
    assert isinstance(parse_skill("---\n" + md, v), (SkillPackage, Invalid))
    assert isinstance(parse_skill(GOOD.skill_md()[:40] + md, GOOD.validators), (SkillPackage, Invalid))
