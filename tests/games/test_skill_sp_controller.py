"""Skill-SP's controller maths: hand values and properties of rewards, routing, pruning and induction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.core.game_types import Invalid
from arena.games.skill_sp.controller import (
    EXPLORATION,
    ControllerConfig,
    Outcome,
    SkillLibrary,
    SkillStats,
    beta_rate,
    proposer_reward,
    quality,
    routing_weight,
    should_prune,
    task_shape,
)
from arena.games.skill_sp.loader import load_library
from arena.games.skill_sp.sandbox import Limits, Sandbox, SandboxPool

# These tests are about what the code returns, not about time: the default 5 s wall limit was hit under a
# loaded suite (a cold interpreter in bubblewrap beside model tests). Busy loops still die at cpu_s = 2.
ROOMY = Limits(wall_s=60.0)

SEEDS = load_library()
CFG = ControllerConfig()
rates = st.floats(0.0, 1.0)


# ------------------------------------------------------------------ hand values
def test_hand_values():
    assert beta_rate(3, 4) == pytest.approx(4 / 6)
    assert beta_rate(0, 0, 2, 3) == pytest.approx(0.4)
    assert quality(1.0, 0.5, 0.0) == pytest.approx(0.625)
    assert routing_weight(0.8, 0, CFG) == pytest.approx(0.8)
    assert routing_weight(0.8, 50, CFG) == pytest.approx(0.8 / math.e)
    assert routing_weight(0.0, 0, CFG) == pytest.approx(CFG.clip_low)
    assert proposer_reward(True, True, 0.5) == 1.0
    assert proposer_reward(True, True, 0.7) == pytest.approx(0.6)
    assert proposer_reward(True, False, 0.5) == 0.0
    assert proposer_reward(False, True, 0.5) == -1.0
    stats = SkillStats().record(Outcome(True, True, True, 0.5, "s"), CFG).record(Outcome(True, True, False, 1.0), CFG)
    assert (stats.n, stats.verified, stats.consistent, stats.frontier, stats.reward_sum) == (2, 2, 1, 1, 1.0)
    assert stats.rates(CFG) == pytest.approx((3 / 4, 2 / 4, 2 / 4))
    assert stats.quality(CFG) == pytest.approx(0.5 * 0.75 + 0.25 * 0.5 + 0.25 * 0.5)
    assert stats.expected_frontier_reward(CFG) == pytest.approx(2 / 4)
    assert stats.coverage == 1


def test_task_shape_ignores_values_not_structure():
    assert task_shape({"answer": 1, "calls": [{"tool": "a"}]}) == task_shape({"calls": [{"tool": "b"}], "answer": 7})
    assert task_shape({"answer": 1}) != task_shape({"answer": "1"})


# ------------------------------------------------------------------ properties
@given(v=rates, valid=st.booleans(), parsed=st.booleans())
def test_proposer_reward_formula(v, valid, parsed):
    r = proposer_reward(parsed, valid, v)
    if not parsed:
        assert r == -1.0
    elif not valid:
        assert r == 0.0
    else:
        assert 0.0 <= r <= 1.0
        assert r == pytest.approx(1 - 2 * abs(v - 0.5))
        assert r == pytest.approx(proposer_reward(parsed, valid, 1.0 - v))  # symmetric about 0.5
        assert r <= proposer_reward(parsed, valid, 0.5)  # peaks at half-solved tasks


@given(v=st.floats(-10, 10).filter(lambda x: not 0 <= x <= 1))
def test_proposer_reward_rejects_impossible_rates(v):
    with pytest.raises(ValueError):
        proposer_reward(True, True, v)


@given(v=st.floats(-1.0, 2.0), uses=st.integers(0, 5000), more=st.integers(1, 5000))
def test_routing_weights_positive_and_decaying(v, uses, more):
    w = routing_weight(v, uses, CFG)
    later = routing_weight(v, uses + more, CFG)
    assert w > 0 and later > 0
    assert later < w


outcomes = st.builds(Outcome, st.booleans(), st.booleans(), st.booleans(), rates, st.sampled_from(["a", "b", ""]))


@settings(max_examples=50, deadline=None)
@given(history=st.lists(st.tuples(st.sampled_from(sorted(SEEDS)), outcomes), max_size=60), seed=st.integers(0, 99))
def test_pruned_skills_are_never_routed(history, seed):
    lib = SkillLibrary(SEEDS.values(), ControllerConfig(prune_min_tasks=2, prune_threshold=0.5))
    for name, outcome in history:
        lib.record(name, outcome)
    pruned = lib.prune()
    for name in pruned:
        assert should_prune(lib.stats[name], lib.config)
        assert name not in lib.weights()
    assert all(w > 0 for w in lib.weights().values())
    routed = lib.route(np.random.default_rng(seed), 200)
    assert not set(routed) & set(pruned)
    assert len(routed) == (200 if lib.active() else 0)


def test_routing_prefers_quality_and_fresh_skills():
    lib = SkillLibrary(SEEDS.values())
    good, bad, stale = "arithmetic", "mini_sudoku", "json_lookup"
    for _ in range(10):
        lib.record(good, Outcome(True, True, True, 0.5))
        lib.record(bad, Outcome(True, False, False, 0.0))
    w = lib.weights()
    assert w[good] > w[bad]
    fresh = "date_arithmetic"
    for i in range(100):  # same outcome mix, so the same smoothed quality, ten times the uses
        lib.record(stale, Outcome(True, i % 2 == 0, i % 2 == 0, 0.5))
        if i < 10:
            lib.record(fresh, Outcome(True, i % 2 == 0, i % 2 == 0, 0.5))
    assert lib.stats[stale].quality(CFG) == pytest.approx(lib.stats[fresh].quality(CFG))
    assert lib.weights()[stale] < lib.weights()[fresh]
    counts = {n: 0 for n in lib.active()}
    for n in lib.route(np.random.default_rng(0), 4000):
        counts[n] += 1
    assert counts["zebra_houses"] > counts[bad]  # untouched skill beats a failing one


# ------------------------------------------------------------------ induction
NEW_SKILL = """---
name: roman_numerals
description: Convert between roman numerals and integers, checked by an exact validator.
kind: logic
routing: {domain: numbers, tags: [roman, numerals, history], difficulty: easy}
---
## Rules
- Ask for the integer value of a roman numeral between I and MMMCMXCIX.

## Generation hints
- Subtractive pairs (IV, XC, CM) make it harder.

## Examples
### Example 1
Task: What integer is MCMXC?

```json
{"numeral": "MCMXC", "answer": 1990}
```
"""
NEW_VALIDATORS = '''
VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def value(numeral):
    total = 0
    for a, b in zip(numeral, numeral[1:] + " "):
        total += -VALUES[a] if VALUES.get(b, 0) > VALUES[a] else VALUES[a]
    return total


def validate(contract):
    if not isinstance(contract, dict) or set(contract) != {"numeral", "answer"}:
        return ["contract has numeral and answer"]
    if value(contract["numeral"]) != contract["answer"]:
        return ["wrong answer"]
    return []


def check(contract, response):
    return response == contract["answer"]
'''


def test_induced_skill_enters_with_lineage():
    lib = SkillLibrary(SEEDS.values())
    pkg = lib.induce(NEW_SKILL, NEW_VALIDATORS, source_task="What integer is XIV?")
    assert not isinstance(pkg, Invalid), pkg
    assert "roman_numerals" in lib.weights()
    assert lib.graph.has_edge(EXPLORATION, "roman_numerals", key="induced_from")
    assert lib.graph.nodes["roman_numerals"]["origin"] == "induced"
    again = lib.induce(NEW_SKILL, NEW_VALIDATORS)
    assert isinstance(again, Invalid) and "taken" in again.reason
    twin = lib.induce(NEW_SKILL.replace("roman_numerals", "roman_numbers"), NEW_VALIDATORS)
    assert isinstance(twin, Invalid) and "too similar" in twin.reason


def test_induction_runs_examples_in_the_sandbox():
    lib = SkillLibrary(SEEDS.values())
    wrong = NEW_SKILL.replace('"answer": 1990', '"answer": 1991')
    with SandboxPool(Sandbox(ROOMY), workers=2) as pool:
        rejected = lib.induce(wrong, NEW_VALIDATORS, pool=pool)
        hostile = lib.induce(NEW_SKILL, NEW_VALIDATORS.replace("return []", "while True:\n        pass"), pool=pool)
        admitted = lib.induce(NEW_SKILL, NEW_VALIDATORS, pool=pool)
    assert isinstance(rejected, Invalid) and "wrong answer" in rejected.reason
    assert isinstance(hostile, Invalid)
    assert not isinstance(admitted, Invalid)


@settings(max_examples=80, deadline=None)
@given(
    cut=st.integers(0, len(NEW_SKILL)),
    junk=st.text(max_size=40),
    validators=st.sampled_from([NEW_VALIDATORS, "import os\n" + NEW_VALIDATORS, "def validate(c): return []", ""]),
)
def test_structurally_invalid_induced_skills_never_enter(cut, junk, validators):
    text = NEW_SKILL[:cut] + junk
    lib = SkillLibrary(SEEDS.values())
    before = (dict(lib.packages), lib.graph.number_of_nodes(), lib.graph.number_of_edges())
    result = lib.induce(text, validators)
    if isinstance(result, Invalid):
        assert (dict(lib.packages), lib.graph.number_of_nodes(), lib.graph.number_of_edges()) == before
    else:  # only a text that still parses as a whole package with good validators may enter
        assert validators == NEW_VALIDATORS and result.name in lib.packages


def test_refine_retires_and_links():
    lib = SkillLibrary(SEEDS.values())
    lib.record("arithmetic", Outcome(True, True, True, 0.5))
    new = SEEDS["arithmetic"].model_copy(update={"name": "arithmetic_v2", "rules": "- Use three operations."})
    assert lib.refine("arithmetic", new) == new
    assert "arithmetic" not in lib.weights() and "arithmetic_v2" in lib.weights()
    assert lib.stats["arithmetic_v2"] == lib.stats["arithmetic"]
    assert lib.graph.has_edge("arithmetic", "arithmetic_v2", key="refined_from")
    assert isinstance(lib.refine("arithmetic", new), Invalid)


# ------------------------------------------------------------------ persistence
def test_save_and_load_are_exact(tmp_path):
    lib = SkillLibrary(SEEDS.values(), ControllerConfig(tau=7.0, prune_min_tasks=1, prune_threshold=0.9))
    rng = np.random.default_rng(3)
    for _ in range(5):
        routed = lib.route(rng, 4)
        lib.co_occur(routed)
        for n in routed:
            lib.record(n, Outcome(True, bool(rng.random() < 0.8), bool(rng.random() < 0.5), float(rng.random()), "x"))
        lib.next_iteration()
    lib.induce(NEW_SKILL, NEW_VALIDATORS, source_task="task text")
    lib.prune()
    lib.save(tmp_path)
    restored = SkillLibrary.load(tmp_path)
    assert restored == lib
    assert restored.weights() == lib.weights()
    assert restored.route(np.random.default_rng(9), 20) == lib.route(np.random.default_rng(9), 20)
    assert (tmp_path / "skills" / "roman_numerals" / "SKILL.md").read_text().startswith("---\nname: roman_numerals")
    lib.record("json_lookup", Outcome(True, True, True, 0.5))
    assert restored != lib
