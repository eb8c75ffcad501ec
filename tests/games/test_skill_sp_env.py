"""The Skill-SP game: rules hand values, the kit with scripted players, hostile proposals, the library state."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.core.game_types import Invalid
from arena.runner import Runner
from arena.testing import check_game
from arena.games.skill_sp import SkillSpGame, SkillState
from arena.games.skill_sp.bots import BOTS
from arena.games.skill_sp.rules import Proposal, canonical, parse_answer, parse_proposal, probe_verdict, proposal_reward
from arena.games.skill_sp.sandbox import Limits
from arena.games.skill_sp.types import SkillSpConfig, SkillSpObservation
from arena.learners.estimators import top_per_stream
from arena.policies.scripted import ScriptedPolicy

SMALL = {"probes": 4, "solvers": 2}
GOOD = '{"task": "What is 6 * 7?", "contract": {"answer": 42, "calls": [{"tool": "calculate", "args": {"expression": "6 * 7"}}]}}'


# ------------------------------------------------------------------ rules
def test_parse_proposal():
    p = parse_proposal("Sure! " + GOOD + " done")
    assert isinstance(p, Proposal) and p.prompt == "What is 6 * 7?" and p.kind == "tool_use"
    assert parse_proposal('{"task": "x", "contract": {"answer": [1]}}').kind == "logic"
    for bad in ["", "no json", '{"task": "x"}', '{"task": "", "contract": {"answer": 1}}',
                '{"task": "x", "contract": {"calls": []}}', '{"task": 3, "contract": {"answer": 1}}']:  # fmt: skip
        assert isinstance(parse_proposal(bad), Invalid), bad
    assert isinstance(parse_proposal(json.dumps({"task": "x" * 3000, "contract": {"answer": 1}})), Invalid)


def test_parse_answer():
    assert parse_answer(" 42 ") == 42
    assert parse_answer('```json\n{"A": "knight"}\n```') == {"A": "knight"}
    assert parse_answer('I call [{"tool": "calculate", "args": {"expression": "1"}}] now') == [
        {"tool": "calculate", "args": {"expression": "1"}}
    ]
    assert isinstance(parse_answer("no idea"), Invalid)


def test_probe_verdict_hand_values():
    v = probe_verdict([True, True, False, False], [42, 42.0000000001, 7, None], 42, 4)
    assert (v.v_solve, v.majority, v.consistent) == (0.5, canonical(42), True)
    tie = probe_verdict([True, False], [42, 7], 42, 2)
    assert tie.majority is None and not tie.consistent
    wrong = probe_verdict([False] * 3, [7, 7, 42], 42, 3)
    assert wrong.majority == canonical(7) and not wrong.consistent
    assert probe_verdict([], [None, None], 1, 2).majority is None
    assert proposal_reward(False, False, None) == -1.0
    assert proposal_reward(True, False, None) == 0.0
    assert proposal_reward(True, True, v) == 1.0
    assert proposal_reward(True, True, wrong) == 0.0


# ------------------------------------------------------------------ the game
def test_passes_the_kit_with_scripted_players():
    check_game(lambda: SkillSpGame(**SMALL), bot=BOTS["default"], seeds=(0, 1))


def play(bot: str, n: int, **config):
    runner = Runner(lambda: SkillSpGame(**{**SMALL, **config}), {"bot": ScriptedPolicy(BOTS[bot])}, num_envs=4)
    return runner.play(list(range(n)))


def test_scripted_episodes_reward_the_frontier():
    episodes = play("default", 8)
    assert all(ep.info["parsed"] and ep.info["verified"] for ep in episodes)
    valid = [ep for ep in episodes if ep.info["consistent"]]
    assert valid and {ep.info["stream"] for ep in episodes} == {"skill", "exploration"}
    for ep in episodes:
        v = ep.info["v_solve"]
        expected = (1 - 2 * abs(v - 0.5)) if ep.info["consistent"] else 0.0
        assert ep.rewards["proposer"] == pytest.approx(expected)
        solver_turns = [t for t in ep.turns if t.role == "solver"]
        assert bool(solver_turns) == ep.info["consistent"]
        for t in solver_turns:  # solvers never see skill text by default (PROTOCOLS.md)
            text = json.dumps(t.messages)
            assert "Generation hints" not in text and "Example contract" not in text and "Skill rules:" not in text
    oracle = play("oracle", 4, exploration_share=0.0)
    assert all(ep.info["v_solve"] == 1.0 and ep.rewards["proposer"] == 0.0 for ep in oracle)
    assert all(ep.rewards[f"solver_{i}"] == 1.0 for ep in oracle for i in range(2))
    guess = play("guess", 4)
    assert all(not ep.info["consistent"] and ep.rewards["proposer"] == 0.0 for ep in guess)


def test_solver_sees_the_skill_only_when_switched_on():
    """PROTOCOLS.md: the solver never sees skill text (the default); ``solver_sees_skill: true``
    (pi_solver(action | observation, skill)) gives probes and solvers the routed skill's name,
    description and rules."""
    from arena.games.skill_sp.prompts import solver_messages

    for sees in (True, False):
        episodes = play("default", 6, exploration_share=0.0, solver_sees_skill=sees)
        assert SkillSpGame(**SMALL).config.solver_sees_skill is False
        turns = [(ep, t) for ep in episodes for t in ep.turns if t.role in ("solver", "probe")]
        assert turns
        for ep, t in turns:
            system = t.messages[0]["content"]
            assert (f"Skill: {ep.info['skill']} - " in system) == sees, (sees, system)
            assert "Generation hints" not in json.dumps(t.messages)
    obs = SkillSpObservation(role="solver", task="T?", kind="logic", skill="sk", description="does d", rules="r1\nr2")
    assert solver_messages(obs)[0]["content"].endswith("\n\nSkill: sk - does d\nSkill rules:\nr1\nr2")
    assert solver_messages(obs)[1] == {"role": "user", "content": "T?"}
    bare = SkillSpObservation(role="solver", task="T?", kind="logic")
    assert "Skill" not in solver_messages(bare)[0]["content"]


def drive(env: SkillSpGame, texts: dict[str, str], seed: int = 0, options: dict | None = None) -> None:
    env.reset(seed=seed, options=options)
    while not env.done:
        seat = env.agent_selection
        env.step(texts.get(seat, texts.get(env.role(seat), "")))


def test_parse_failure_and_rejected_contracts():
    env = SkillSpGame(**SMALL)
    drive(env, {"proposer": "I cannot"})
    assert env.episode().rewards["proposer"] == -1.0 and len(env.turns) == 1
    drive(env, {"proposer": GOOD.replace('"answer": 42', '"answer": 41')}, options={"stream": "exploration"})
    ep = env.episode()
    assert ep.rewards["proposer"] == 0.0 and not ep.info["verified"] and "not the answer" in ep.info["reason"]


def test_hostile_proposals_end_as_typed_failures():
    env = SkillSpGame(**SMALL, sandbox=Limits(wall_s=3.0, cpu_s=1))
    redos = {"task": "Find matches.", "contract": {"answer": [], "calls": [
        {"tool": "regex_findall", "args": {"pattern": "(a+)+$", "text": "a" * 40 + "b"}}]}}  # fmt: skip
    drive(env, {"proposer": json.dumps(redos)}, options={"stream": "exploration"})
    ep = env.episode()
    assert not ep.info["verified"] and "timeout" in ep.info["reason"] and ep.rewards["proposer"] == 0.0
    # a probe whose tool call is hostile fails alone; the others are still judged
    drive(env, {"proposer": GOOD, "probe_0": json.dumps(redos["contract"]["calls"]),
                "probe": '{"tool": "calculate", "args": {"expression": "6 * 7"}}', "solver": "42"},
          options={"stream": "exploration"})  # fmt: skip
    ep = env.episode()
    assert ep.info["v_solve"] == 0.75 and ep.info["consistent"]


def test_options_fix_the_stream_and_skill():
    env = SkillSpGame(**SMALL)
    env.reset(seed=0, options={"skill": "mini_sudoku"})
    assert env.observe("proposer").skill == "mini_sudoku" and env.observe("proposer").kind == "logic"
    env.reset(seed=0, options={"stream": "exploration"})
    assert env.observe("proposer").skill == ""
    with pytest.raises(ValueError, match="unknown or inactive skill"):
        env.reset(seed=0, options={"skill": "nope"})


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(st.text(max_size=80) | st.sampled_from(["42", "[]", "{}", '{"A": 1}', "null"]), min_size=6, max_size=6))
def test_any_string_from_any_seat_never_raises(texts):  # fmt: skip
    env = SkillSpGame(**SMALL)
    seats = env.possible_agents
    drive(env, {"proposer": GOOD, **{s: t for s, t in zip(seats[1:], texts, strict=False)}},
          options={"stream": "exploration"})  # fmt: skip
    assert env.done and env.episode().info["verified"]


# ------------------------------------------------------------------ the library state
def test_state_updates_saves_and_restores(tmp_path):
    config = SkillSpConfig(**SMALL, exploration_share=0.0)
    state = SkillState(config)
    runner = Runner(lambda: SkillSpGame(config), {"bot": ScriptedPolicy(BOTS["default"])}, num_envs=4, state=state)
    episodes = runner.play(list(range(6)))
    metrics = state.update(episodes, {})
    routed = {ep.info["skill"] for ep in episodes}
    assert metrics["library_size"] == 12 and metrics["pruned"] == 0 and metrics["graph/co_occurs"] >= 1
    assert {f"validity/{s}" for s in routed} <= set(metrics)
    assert all(state.library.stats[s].n >= 1 for s in routed)
    assert sum(s.n for s in state.library.stats.values()) == 6
    state.save(tmp_path)
    restored = SkillState(config)
    restored.load(tmp_path)
    assert restored.library == state.library
    assert restored.snapshot() == state.snapshot()


def test_bad_skills_dir_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="skills_dir"):
        SkillSpConfig(skills_dir=str(tmp_path))


# ------------------------------------------------------------------ the solver curriculum
def test_curriculum_hand_values():
    tasks = [("skill", 0.2), ("exploration", 0.9), ("skill", 0.8), ("skill", 0.8), ("exploration", 0.1)]
    assert top_per_stream(tasks, 4, 0.5) == [1, 2, 3, 4]
    assert top_per_stream(tasks, 2, 0.5) == [1, 2]
    assert top_per_stream(tasks, 2, 1.0) == [2, 3]
    assert top_per_stream(tasks[:2], 4, 0.5) == [0, 1]
    assert top_per_stream([("skill", 0.5)] * 3, 2, 0.5) == [0]
    assert top_per_stream([("skill", 0.5)] * 3, 2, 0.5, fill=True) == [0, 1]


@given(
    tasks=st.lists(st.tuples(st.sampled_from(["skill", "exploration"]), st.floats(0, 1)), max_size=20),
    m=st.integers(0, 25), alpha=st.floats(0, 1), fill=st.booleans(),
)
def test_curriculum_properties(tasks, m, alpha, fill):  # fmt: skip
    chosen = top_per_stream(tasks, m, alpha, fill)
    assert len(chosen) == len(set(chosen)) <= m
    quota = min(m, int(alpha * m + 0.5))
    n_skill = sum(tasks[i][0] == "skill" for i in chosen)
    if not fill:
        assert n_skill <= quota and len(chosen) - n_skill <= m - quota
    for i in chosen:  # nothing left out of its stream ranks above a chosen task
        stream, reward = tasks[i]
        assert all(r <= reward for j, (s, r) in enumerate(tasks) if s == stream and j not in chosen)


def test_curriculum_estimator_keeps_only_the_chosen_tasks():
    from arena.loop.config import load_config
    from arena.learners.estimators import EstimatorStates
    from arena.learners.samples import build_samples

    cfg = load_config("games/skill_sp/skill_sp.yaml")
    assert cfg.learner.estimators["solve"].name == "skill_sp_curriculum"
    episodes = play("default", 8)
    for ep in episodes:  # pretend every solver turn came from the trainable policy with tokens
        for t in ep.turns:
            t.policy, t.prompt_ids, t.completion_ids, t.logprobs = "learner", [1], [2], [-0.1]
    samples, stats = build_samples(episodes, ["solve"], cfg.learner, EstimatorStates(cfg.learner.estimators), "learner")
    valid = [(i, ep) for i, ep in enumerate(episodes) if ep.info["consistent"]]
    chosen = {valid[j][0] for j in top_per_stream([(ep.info["stream"], ep.rewards["proposer"]) for _, ep in valid], 2, 0.5)}
    groups = {s.extras["group"].split("|")[0] for s in samples}
    varied = {episodes[i].episode_id for i in chosen if len({episodes[i].rewards[f"solver_{k}"] for k in range(2)}) > 1}
    assert groups == varied  # the chosen tasks whose solvers disagree; nothing else
    assert len(chosen) == 2 and stats["solve/dropped"] == stats["solve/turns"] - len(samples)
    assert stats["solve/turns"] == 2 * len(valid)


# ------------------------------------------------------------------ the held-out set
def test_heldout_tasks_are_valid_in_the_sandbox_and_not_seed_examples():
    from arena.games.skill_sp.env import shared_pool
    from arena.games.skill_sp.heldout import load_heldout, seed_library
    from arena.games.skill_sp.sandbox import Job

    tasks = load_heldout()
    assert len(tasks) >= 20 and len({t["skill"] for t in tasks}) == 12
    seeds = seed_library()
    assert not {t["task"] for t in tasks} & {ex.prompt for p in seeds.values() for ex in p.examples}
    jobs = [Job(files=seeds[t["skill"]].sandbox_files(), module="validators", function="validate",
                kwargs={"contract": t["contract"]}) for t in tasks]  # fmt: skip
    assert [r.value for r in shared_pool(Limits(), 4).map(jobs)] == [[]] * len(tasks)


def test_heldout_mode_scores_solvers_only():
    from arena.games.skill_sp.heldout import load_heldout

    tasks = load_heldout()
    env = SkillSpGame(**SMALL, mode="heldout")
    for index in (0, len(tasks) - 1):
        t = tasks[index]
        right = json.dumps(t["contract"]["calls"] if "calls" in t["contract"] else t["contract"]["answer"])
        drive(env, {"solver_0": right, "solver_1": "no idea"}, options={"task": index})
        ep = env.episode()
        assert [turn.role for turn in ep.turns] == ["solver", "solver"]
        assert ep.metrics == {"solver_accuracy": 0.5} and ep.info["stream"] == "heldout"
        assert (ep.rewards["solver_0"], ep.rewards["solver_1"], ep.rewards["proposer"]) == (1.0, 0.0, 0.0)
    state = SkillState(SkillSpConfig(**SMALL))
    state.update([ep], {})
    assert all(s.n == 0 for s in state.library.stats.values())  # evaluation never feeds the controller


def test_heldout_config_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"skill": "nope", "task": "x", "contract": {}}\n')
    with pytest.raises(ValueError, match="unknown skill"):
        SkillSpConfig(mode="heldout", heldout_path=str(bad))


# ------------------------------------------------------------------ BFCL (the paper's benchmark) from bfcl-eval
needs_bfcl = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("bfcl_eval") is None, reason="bfcl-eval not installed (make setup)"
)


@needs_bfcl
def test_bfcl_simple_tasks_load_and_their_references_pass():
    import types

    from arena.games.skill_sp.bfcl import VALIDATORS, load_bfcl

    rows = load_bfcl()
    assert len(rows) >= 300
    checker = types.ModuleType("bfcl_validators")
    exec(compile(VALIDATORS.read_text(), "bfcl_validators.py", "exec"), checker.__dict__)  # noqa: S102
    for row in rows:
        c = row["contract"]
        args = {p: next(v for v in vs if v != "") for p, vs in c["answer"].items() if any(v != "" for v in vs)}
        assert checker.validate(c) == [] and checker.check(c, {"tool": c["function"], "args": args}), row["task"]
    c = rows[0]["contract"]  # calculate_triangle_area(base=10, height=5, unit optional)
    assert checker.check(c, [{"tool": c["function"], "args": {"base": 10.0, "height": 5, "unit": "Units"}}])
    assert not checker.check(c, {"tool": c["function"], "args": {"base": 10, "height": 6}})
    assert not checker.check(c, {"tool": c["function"], "args": {"base": 10}})
    assert not checker.check(c, {"tool": c["function"], "args": {"base": 10, "height": 5, "color": "red"}})
    assert not checker.check(c, {"tool": "other", "args": {"base": 10, "height": 5}})


@needs_bfcl
def test_bfcl_heldout_episode_in_the_sandbox():
    env = SkillSpGame(**SMALL, mode="heldout", heldout_source="bfcl_simple")
    right = '{"tool": "calculate_triangle_area", "args": {"base": 10, "height": 5}}'
    drive(env, {"solver_0": right, "solver_1": '{"tool": "calculate_triangle_area", "args": {"base": 5}}'},
          options={"task": 0})  # fmt: skip
    ep = env.episode()
    assert ep.info["skill"] == "bfcl" and ep.metrics == {"solver_accuracy": 0.5}
    assert "calculate_triangle_area" in ep.turns[0].messages[-1]["content"]


def test_proposer_prefix_opens_the_reply_and_is_parsed_with_it():
    prefix = '{"task": "'
    env = SkillSpGame(**SMALL, proposer_prefix=prefix)
    env.reset(seed=0, options={"stream": "exploration"})
    messages = env.render_messages(env.observe(env.agent_selection))
    assert env.agent_selection == "proposer"
    assert messages[-1] == {"role": "assistant", "content": prefix, "continue_final": True}
    env.step(GOOD.removeprefix(prefix))  # the model writes only the rest
    assert env.turns[0].valid and env.proposal.prompt == "What is 6 * 7?"
    solver = next(s for s in env.possible_agents if s.startswith("solver") or s.startswith("probe"))
    assert env.render_messages(env.observe(solver))[-1]["role"] != "assistant"  # only the proposer's is opened
