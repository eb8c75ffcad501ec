"""Skill-SP's pure rules and controller maths against hand-computed values.

``arena/games/skill_sp/rules.py`` (parsing, the probe majority, rewards), the solver curriculum
(``arena.learners.estimators.top_per_stream``) and the pure part of ``arena/games/skill_sp/controller.py`` (Beta-smoothed rates, quality, the
routing bonus, pruning, induction without the sandbox). Parameters are asymmetric
(prior a != b, band_low != 1 - band_high, bonus != 1) so swapped or dropped terms show.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from arena.core.game_types import Invalid
from arena.games.skill_sp.controller import (
    EXPLORATION,
    ControllerConfig,
    _words,
    Outcome,
    SkillLibrary,
    SkillStats,
    beta_rate,
    exploration_bonus,
    jaccard,
    proposer_reward,
    quality,
    routing_weight,
    should_prune,
    task_shape,
    weights_table,
)
from arena.games.skill_sp.loader import load_library, parse_skill
from arena.games.skill_sp.rules import (
    ProbeVerdict,
    Proposal,
    canonical,
    json_values,
    parse_answer,
    parse_proposal,
    probe_verdict,
    proposal_reward,
)
from arena.learners.estimators import top_per_stream
from tolerance import within

SEEDS = load_library()
CFG = ControllerConfig(
    prior_a=2.0, prior_b=3.0, band_low=0.3, band_high=0.6, clip_low=0.1, bonus=2.0, tau=10.0,
    prune_threshold=0.4, prune_min_tasks=3,
)


# ------------------------------------------------------------------ rules: parsing
def test_json_values_outermost_first_in_order() -> None:
    assert json_values('{"a": 1} x [2, 3] {bad} {"b": [4]}') == [{"a": 1}, [2, 3], {"b": [4]}]
    assert json_values('[1, {"a": 2}] then {"c": 3}') == [[1, {"a": 2}], {"c": 3}]  # '[' before '{'
    assert json_values('{"x": [1]} [5]') == [{"x": [1]}, [5]]
    assert json_values('{{"a": 1}') == [{"a": 1}]  # a failed start moves on by one character
    assert json_values("no json here 42") == []


def _proposal(task: str, contract: object) -> str:
    return json.dumps({"task": task, "contract": contract})


def test_parse_proposal_takes_the_last_well_formed_object() -> None:
    text = "draft " + _proposal("first", {"answer": 1}) + " final " + _proposal("  second  ", {"answer": 2})
    assert parse_proposal(text) == Proposal("second", {"answer": 2})
    # later objects that are not proposals are skipped over
    later = _proposal("ok", {"answer": 3}) + ' {"task": 5, "contract": {}} {"task": "t", "contract": [1]} [1]'
    assert parse_proposal(later) == Proposal("ok", {"answer": 3})
    assert parse_proposal('{"contract": {"answer": 1}}') == Invalid(
        reason='no JSON object {"task": ..., "contract": {...}} found'
    )


def test_parse_proposal_limits_and_reasons() -> None:
    too_long = Invalid(reason="the task or the contract is too long")
    assert parse_proposal(_proposal(" \n ", {"answer": 1})) == Invalid(reason="the task is empty")
    assert parse_proposal(_proposal("a" * 2000, {"answer": 1})) == Proposal("a" * 2000, {"answer": 1})
    assert parse_proposal(_proposal("a" * 2001, {"answer": 1})) == too_long
    # json.dumps({"answer": "...", "x": ""}) is 23 characters plus the answer's
    fits = {"answer": "y" * (6000 - 23), "x": ""}
    assert len(json.dumps(fits)) == 6000
    assert isinstance(parse_proposal(_proposal("t", fits)), Proposal)
    over = {"answer": "y" * (6001 - 23), "x": ""}
    assert parse_proposal(_proposal("t", over)) == too_long
    assert parse_proposal(_proposal("t", {"calls": []})) == Invalid(reason='the contract has no "answer"')
    assert Proposal("t", {"answer": 1, "calls": []}).kind == "tool_use"
    assert Proposal("t", {"answer": 1}).kind == "logic"


def test_parse_answer_whole_text_then_last_json() -> None:
    assert parse_answer("```json\n42\n```") == 42  # a fenced scalar: only the whole-text parse finds it
    assert parse_answer("```\n7\n```") == 7
    assert parse_answer(' "s" ') == "s"
    assert parse_answer('The answer is [1, 2] or rather {"x": 3}.') == {"x": 3}
    assert parse_answer("first [1] then [2] and last [3]") == [3]
    assert parse_answer("no json") == Invalid(reason="no JSON answer found")


def test_canonical_keys() -> None:
    assert canonical(3.0) == "3" and canonical(0.1 + 0.2) == "0.3"
    assert canonical(1234567.0) == "1234570"  # 6 significant digits
    assert canonical(2.5) == "2.5"
    assert canonical({"b": [1.0, 2.25], "a": "x"}) == '{"a": "x", "b": [1, 2.25]}'
    assert canonical({1: 2.0}) == '{"1": 2}'
    assert canonical("1.0") == '"1.0"' and canonical(True) == "true"
    assert canonical([[0.5000001]]) == "[[0.5]]"


# ------------------------------------------------------------------ rules: probes and rewards
def test_probe_verdict_hand_cases() -> None:
    v = probe_verdict([True, False, True], [1, 1.0, 2, None], 1, k=4)
    assert v == ProbeVerdict(0.5, "1", True)  # v_solve divides by k, not by the answers given
    assert probe_verdict([True], [2, 2, 1], 1, k=3) == ProbeVerdict(1 / 3, "2", False)
    assert probe_verdict([], [1, 2], 1, k=2) == ProbeVerdict(0.0, None, False)  # a tie has no majority
    assert probe_verdict([], [1, 2, 2, 1, 3], 1, k=5).majority is None
    assert probe_verdict([], [3], 3, k=1) == ProbeVerdict(0.0, "3", True)  # a lone answer is the majority
    assert probe_verdict([True, True], [None, None], 1, k=2) == ProbeVerdict(1.0, None, False)
    # the first answer of the majority key is compared (same_value's tolerance is 1e-6):
    assert probe_verdict([], [0.1000001, 0.1000004], 0.1000012, k=2).consistent is False
    assert probe_verdict([], [0.1000004, 0.1000001], 0.1000012, k=2).consistent is True
    assert probe_verdict([1, 0, 2], [], 0, k=3).v_solve == pytest.approx(2 / 3)  # truthy values count
    assert probe_verdict([], [None, 1, 1, 2], 1, k=4) == ProbeVerdict(0.0, "1", True)  # abstentions are skipped
    with pytest.raises(ValueError, match=r"^k must be positive$"):
        probe_verdict([], [], 0, k=0)


def test_proposal_reward_branches() -> None:
    good = ProbeVerdict(0.3, "1", True)
    assert proposal_reward(False, True, good) == -1.0
    assert proposal_reward(True, False, good) == 0.0
    assert proposal_reward(True, True, None) == 0.0
    assert proposal_reward(True, True, good) == pytest.approx(0.6)
    assert proposal_reward(True, True, ProbeVerdict(0.9, "1", False)) == 0.0
    assert proposal_reward(True, True, ProbeVerdict(0.75, None, True)) == pytest.approx(0.5)


def test_curriculum_quota_rounds_halves_up() -> None:
    """The audit's case: alpha 0.5, M = 5 -> 3 skill tasks (Python's round: 2), M = 7 -> 4."""
    skill = [("skill", 1.0 - 0.01 * i) for i in range(10)]
    explore = [("exploration", 1.0 - 0.01 * i) for i in range(10)]
    tasks = skill + explore
    for m, want in ((5, 3), (7, 4), (1, 1), (3, 2), (4, 2), (0, 0)):
        chosen = top_per_stream(tasks, m, 0.5)
        assert sum(tasks[i][0] == "skill" for i in chosen) == want and len(chosen) == m
    chosen = top_per_stream(tasks, 5, 0.3)  # 1.5 -> 2
    assert sum(tasks[i][0] == "skill" for i in chosen) == 2
    chosen = top_per_stream(tasks, 4, 0.6)  # 2.4 -> 2
    assert sum(tasks[i][0] == "skill" for i in chosen) == 2


def test_curriculum_quotas_ranking_and_fill() -> None:
    tasks = [("skill", 0.2), ("exploration", 0.9), ("skill", 0.8), ("exploration", 0.1),
             ("skill", 0.8), ("exploration", 0.5), ("skill", 0.1)]  # fmt: skip
    # m = 5, alpha = 0.4: 2 skill (0.8 at 2, 0.8 at 4: ties by index), 3 exploration (all three)
    assert top_per_stream(tasks, 5, 0.4) == [1, 2, 3, 4, 5]
    # alpha = 0.8: round(4.0) = 4 skill, 1 exploration (the 0.9)
    assert top_per_stream(tasks, 5, 0.8) == [0, 1, 2, 4, 6]
    assert top_per_stream(tasks, 2, 0.5) == [1, 2]  # 1 skill, 1 exploration
    assert top_per_stream(tasks, 3, 0.5) == [1, 2, 4]  # 1.5 rounds up: 2 skill, 1 exploration
    assert top_per_stream(tasks, 3, 0.0) == [1, 3, 5] and top_per_stream(tasks, 3, 1.0) == [0, 2, 4]
    # 6 skill wanted, only 4 exist; without fill 4 + 0, with fill the 2 spare go to exploration
    assert top_per_stream(tasks, 6, 1.0) == [0, 2, 4, 6]
    assert top_per_stream(tasks, 6, 1.0, fill=True) == [0, 1, 2, 4, 5, 6]
    assert top_per_stream(tasks, 5, 1.0, fill=True) == [0, 1, 2, 4, 6]  # one spare: the best exploration task
    assert top_per_stream(tasks, 6, 0.0, fill=True) == [0, 1, 2, 3, 4, 5]  # 3 exploration + 3 spare to skill
    assert top_per_stream(tasks, 6, 0.0) == [1, 3, 5]
    assert top_per_stream(tasks, 0, 0.5) == []
    for m, alpha in ((-1, 0.5), (2, -0.1), (2, 1.1)):
        with pytest.raises(ValueError, match=r"^need m >= 0 and alpha in \[0, 1\]$"):
            top_per_stream(tasks, m, alpha)


# ------------------------------------------------------------------ controller: formulas
def test_formulas_with_asymmetric_parameters() -> None:
    assert beta_rate(1, 4, 2.0, 3.0) == pytest.approx(3 / 9)
    assert beta_rate(0, 0) == 0.5 and beta_rate(2, 2) == 0.75
    assert beta_rate(4, 4, 1.0, 3.0) == pytest.approx(5 / 8)
    for k, n in ((-1, 2), (3, 2)):
        with pytest.raises(ValueError, match="need 0 <= k <= n"):
            beta_rate(k, n)
    assert quality(0.8, 0.4, 0.2) == pytest.approx(0.4 + 0.1 + 0.05)
    assert quality(0.0, 1.0, 0.0) == 0.25 and quality(0.0, 0.0, 1.0) == 0.25
    assert exploration_bonus(5, 2.0, 10.0) == pytest.approx(2.0 * math.exp(-0.5))
    assert routing_weight(0.5, 5, CFG) == pytest.approx(0.5 * 2.0 * math.exp(-0.5))
    assert routing_weight(0.05, 0, CFG) == pytest.approx(0.1 * 2.0)  # clipped up to clip_low
    assert routing_weight(1.5, 10, CFG) == pytest.approx(2.0 / math.e)  # clipped down to 1
    assert proposer_reward(True, True, 0.2) == pytest.approx(0.4)
    assert proposer_reward(True, True, 0.0) == 0.0 and proposer_reward(True, True, 1.0) == 0.0
    assert proposer_reward(False, False, 0.0) == -1.0
    for v in (-0.01, 1.01):
        with pytest.raises(ValueError, match="v_solve is a rate"):
            proposer_reward(True, True, v)
    assert jaccard({"a", "b", "c"}, {"b", "c", "d", "e"}) == pytest.approx(2 / 5)
    assert jaccard(set(), set()) == 0.0


def test_task_shape_structure() -> None:
    assert task_shape({"a": [1, 2], "b": {"c": "x"}}) == task_shape({"b": {"c": "y"}, "a": [3]})
    assert task_shape({"a": [1]}) != task_shape({"a": ["1"]})
    assert task_shape({"a": []}) != task_shape({"a": [1]})
    assert task_shape({"a": 1}) != task_shape({"b": 1})
    assert task_shape([{"a": 1}, "x"]) == task_shape([{"a": 2}])  # a list's shape is its first item's
    assert len(task_shape({"a": 1})) == 12 and task_shape(1) != task_shape(1.0)


def test_stats_record_with_asymmetric_band_and_prior() -> None:
    outcomes = [
        Outcome(True, True, True, 0.3, "s1"),  # valid, at band_low: frontier, reward 0.6
        Outcome(True, True, True, 0.6, "s2"),  # valid, at band_high: frontier, reward 0.8
        Outcome(True, True, True, 0.7, "s1"),  # valid, above the band, reward 0.6
        Outcome(True, True, False, 0.5, ""),  # verified, not consistent: reward 0
        Outcome(True, False, True, 0.5),  # consistent, not verified
        Outcome(False, True, True, 0.5, "s3"),  # unparsed: counts nothing, reward -1 clipped to 0
    ]
    st = SkillStats()
    for o in outcomes:
        st = st.record(o, CFG)
    assert (st.n, st.verified, st.consistent, st.frontier, st.uses) == (6, 4, 4, 2, 6)
    assert st.reward_sum == pytest.approx(2.0)
    assert st.shapes == ("s1", "s2", "s3") and st.coverage == 3
    assert st.rates(CFG) == pytest.approx((6 / 11, 6 / 11, 4 / 11))
    assert st.quality(CFG) == pytest.approx(0.5 * 6 / 11 + 0.25 * 6 / 11 + 0.25 * 4 / 11)
    assert st.expected_frontier_reward(CFG) == pytest.approx(4 / 11)
    below = SkillStats().record(Outcome(True, True, True, 0.29), CFG).record(Outcome(True, True, True, 0.61), CFG)
    assert below.frontier == 0
    assert SkillStats().record(Outcome(True, False, True, 0.5), CFG).frontier == 0  # invalid: no frontier credit


def test_frontier_rate_counts_valid_tasks_only_over_all_tasks() -> None:
    """Two tasks with v_solve 0.5 in the band, one valid, one not solver-consistent: s3 = (1 + a) / (2 + a + b)
    (3/7 with this prior; counting every in-band task would give 4/7)."""
    st = SkillStats().record(Outcome(True, True, True, 0.5), CFG).record(Outcome(True, True, False, 0.5), CFG)
    assert st.frontier == 1 and st.n == 2
    a, b = CFG.prior_a, CFG.prior_b
    assert st.rates(CFG)[2] == pytest.approx((1 + a) / (2 + a + b)) == pytest.approx(3 / 7)
    st3 = SkillStats().record(Outcome(True, True, True, 0.5), CFG).record(Outcome(False, False, False, 0.5), CFG)
    assert st3.frontier == 1 and st3.n == 2  # a parse failure is in the denominator too


def test_induction_default_is_the_papers_about_20_per_iteration() -> None:
    from arena.games.skill_sp.evolve import EvolutionConfig
    from arena.games.skill_sp.types import SkillSpConfig

    assert EvolutionConfig().induce_per_step == 20 and SkillSpConfig().evolution.induce_per_step == 20


def test_should_prune_needs_evidence_and_a_low_reward() -> None:
    bad = Outcome(True, False, False, 0.5)
    two = SkillStats().record(bad, CFG).record(bad, CFG)  # reward (0 + 2) / (2 + 5) = 0.286 < 0.4
    assert not should_prune(two, CFG)  # n = 2 < prune_min_tasks = 3
    three = two.record(bad, CFG)  # 2 / 8 = 0.25
    assert should_prune(three, CFG)
    good = Outcome(True, True, True, 0.5)
    fine = three.record(good, CFG).record(good, CFG)  # (2 + 2) / (5 + 5) = 0.4: not below
    assert fine.expected_frontier_reward(CFG) == pytest.approx(0.4) and not should_prune(fine, CFG)


# ------------------------------------------------------------------ controller: the library
def _library() -> SkillLibrary:
    return SkillLibrary(SEEDS.values(), CFG)


def test_weights_route_and_table() -> None:
    lib = _library()
    names = sorted(SEEDS)
    a, b = names[0], names[1]
    for _ in range(3):
        lib.record(a, Outcome(True, True, True, 0.5, "x"))
    lib.record(b, Outcome(False, False, False, 0.0))
    w = lib.weights()
    assert list(w) == lib.active() == names
    qa = quality(5 / 8, 5 / 8, 5 / 8)
    assert w[a] == pytest.approx(qa * 2.0 * math.exp(-0.3))
    assert w[b] == pytest.approx(quality(2 / 6, 2 / 6, 2 / 6) * 2.0 * math.exp(-0.1))
    assert w[names[2]] == pytest.approx(quality(0.4, 0.4, 0.4) * 2.0)
    assert sum(weights_table(lib).values()) == pytest.approx(1.0)
    assert weights_table(lib)[a] == pytest.approx(w[a] / sum(w.values()))
    routed = lib.route(np.random.default_rng(0), 4000)
    share = routed.count(a) / 4000
    assert share == within(w[a] / sum(w.values()), 0.03, "4,000 routed draws")
    assert lib.route(np.random.default_rng(0), 0) == [] and lib.route(np.random.default_rng(0), -1) == []
    assert len(lib.route(np.random.default_rng(0), 1)) == 1
    expected = np.random.default_rng(5).choice(len(names), size=3, p=np.array(list(w.values())) / sum(w.values()))
    assert lib.route(np.random.default_rng(5), 3) == [names[i] for i in expected]


def test_prune_marks_and_removes_from_routing() -> None:
    lib = _library()
    names = sorted(SEEDS)
    for _ in range(3):
        lib.record(names[0], Outcome(True, False, False, 0.5))
    lib.record(names[1], Outcome(True, False, False, 0.5))
    assert lib.prune() == [names[0]]
    assert lib.graph.nodes[names[0]]["status"] == "pruned" and names[0] not in lib.weights()
    assert lib.prune() == []  # already pruned
    empty = SkillLibrary([], CFG)
    assert empty.weights() == {} and empty.route(np.random.default_rng(0), 3) == [] and weights_table(empty) == {}


def test_co_occurrence_counts_pairs_once() -> None:
    lib = _library()
    a, b, c = sorted(SEEDS)[:3]
    lib.co_occur([b, a, b, c])
    lib.co_occur([a, b])
    assert lib.graph.edges[a, b, "co_occurs"]["count"] == 2
    assert lib.graph.edges[a, c, "co_occurs"]["count"] == 1 and lib.graph.edges[b, c, "co_occurs"]["count"] == 1
    assert not lib.graph.has_edge(b, a) and not lib.graph.has_edge(a, a)
    lib.refine(a, _rename(SEEDS[a], "zz_refined"))  # a refined_from edge a -> zz_refined is not a co-occurrence
    lib.co_occur(["zz_refined", a])
    assert lib.graph.edges[a, "zz_refined", "co_occurs"]["count"] == 1


def _rename(pkg, name):  # noqa: ANN001, ANN202
    return pkg.model_copy(update={"name": name}) if hasattr(pkg, "model_copy") else type(pkg)(**{**pkg.__dict__, "name": name})


def test_novelty_and_refine() -> None:
    lib = _library()
    name = sorted(SEEDS)[0]
    pkg = SEEDS[name]
    assert lib.novelty_problem(pkg) == f"name {name!r} is taken"
    assert lib.novelty_problem(_rename(pkg, EXPLORATION)) == f"name {EXPLORATION!r} is taken"
    copy = _rename(pkg, "brand_new")
    problem = lib.novelty_problem(copy)
    assert problem == f"too similar to {name!r} (Jaccard 1.00)"
    loose = SkillLibrary([pkg], CFG.model_copy(update={"novelty_max_jaccard": 1.0}))
    assert loose.novelty_problem(copy) == f"too similar to {name!r} (Jaccard 1.00)"  # >= the bound
    other = SkillLibrary([SEEDS[sorted(SEEDS)[1]]], CFG.model_copy(update={"novelty_max_jaccard": 1.0}))
    assert other.novelty_problem(copy) is None
    lib.record(name, Outcome(True, True, True, 0.5, "x"))
    lib.next_iteration()
    assert lib.refine("missing", copy) == Invalid(reason="no active skill 'missing'")
    assert lib.refine(name, _rename(pkg, sorted(SEEDS)[1])) == Invalid(reason=f"name {sorted(SEEDS)[1]!r} is taken")
    assert lib.refine(name, copy) is copy
    assert lib.graph.nodes[name]["status"] == "retired" and lib.graph.nodes["brand_new"]["status"] == "active"
    assert lib.graph.nodes["brand_new"]["origin"] == "refined" and lib.graph.nodes["brand_new"]["iteration"] == 1
    assert lib.stats["brand_new"] == lib.stats[name] and lib.graph.has_edge(name, "brand_new", key="refined_from")
    assert lib.refine(name, _rename(pkg, "again")) == Invalid(reason=f"no active skill {name!r}")
    assert name not in lib.active() and "brand_new" in lib.active()


def test_report_values() -> None:
    lib = _library()
    name = sorted(SEEDS)[0]
    lib.record(name, Outcome(True, True, False, 0.45, "k"))
    row = lib.report()[name]
    s1, s2, s3 = 3 / 6, 2 / 6, 2 / 6
    assert row == pytest.approx({
        "weight": quality(s1, s2, s3) * 2.0 * math.exp(-0.1), "quality": quality(s1, s2, s3), "s_verified": s1,
        "s_consistent": s2, "s_frontier": s3, "frontier_reward": 2 / 6, "coverage": 1, "uses": 1,
    })
    assert set(lib.report()) == set(lib.active())


NEW_SKILL = """---
name: roman_numerals
description: Convert roman numerals to integers.
kind: logic
routing: {domain: numbers, tags: [roman, numerals], difficulty: easy}
---
## Rules
- Ask for the integer value of a roman numeral.

## Generation hints
- Subtractive pairs make it harder.

## Examples
### Example 1
Task: What integer is XIV?

```json
{"numeral": "XIV", "answer": 14}
```
"""
NEW_VALIDATORS = '''
def validate(contract):
    return [] if isinstance(contract, dict) and "answer" in contract else ["no answer"]


def check(contract, response):
    return response == contract["answer"]
'''


def test_induce_without_the_sandbox() -> None:
    lib = _library()
    lib.next_iteration()
    lib.next_iteration()
    broken = lib.induce("not a skill", NEW_VALIDATORS)
    assert isinstance(broken, Invalid) and "roman_numerals" not in lib.packages
    pkg = lib.induce(NEW_SKILL, NEW_VALIDATORS, source_task="q" * 2500)
    assert not isinstance(pkg, Invalid) and pkg.name == "roman_numerals" and lib.packages["roman_numerals"] is pkg
    node = lib.graph.nodes["roman_numerals"]
    assert (node["status"], node["origin"], node["iteration"]) == ("active", "induced", 2)
    assert lib.graph.edges[EXPLORATION, "roman_numerals", "induced_from"]["task"] == "q" * 2000
    assert lib.stats["roman_numerals"] == SkillStats() and "roman_numerals" in lib.weights()
    again = lib.induce(NEW_SKILL, NEW_VALIDATORS)
    assert again == Invalid(reason="name 'roman_numerals' is taken")
    twin = lib.induce(NEW_SKILL.replace("roman_numerals", "roman_numbers"), NEW_VALIDATORS)
    assert isinstance(twin, Invalid) and twin.reason.startswith("too similar to 'roman_numerals'")
    fresh = SkillLibrary([], CFG)
    assert fresh.induce(NEW_SKILL, NEW_VALIDATORS).name == "roman_numerals"
    assert fresh.graph.nodes["roman_numerals"]["iteration"] == 0
    assert fresh.graph.has_edge(EXPLORATION, "roman_numerals", key="induced_from")
    assert fresh.graph.edges[EXPLORATION, "roman_numerals", "induced_from"]["task"] == ""


def test_novelty_words_of_a_package() -> None:
    pkg = parse_skill(NEW_SKILL, NEW_VALIDATORS)
    assert not isinstance(pkg, Invalid)
    # description, tags and rules, lower case, words of two or more characters ("a" is not one)
    assert _words(pkg) == {"convert", "roman", "numerals", "to", "integers", "ask", "for", "the", "integer", "value",
                           "of", "numeral"}  # fmt: skip


def test_a_new_library_graph() -> None:
    lib = _library()
    assert dict(lib.graph.nodes[EXPLORATION]) == {"status": "stream", "origin": "stream", "iteration": 0}
    for name in SEEDS:
        assert dict(lib.graph.nodes[name]) == {"status": "active", "origin": "seed", "iteration": 0}
    assert lib.iteration == 0 and lib.graph.number_of_edges() == 0 and lib.config is CFG
    assert SkillLibrary().config == ControllerConfig() and list(SkillLibrary().graph.nodes) == [EXPLORATION]
