"""The household game: solvable tasks, the grammar, the split, rewards, skills and the conformance kit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.core.game import Invalid
from arena.testing import check_game
from arena.games.household import HouseholdGame
from arena.games.household.actions import format_action, normalise, parse_action
from arena.games.household.bots import BOTS
from arena.games.household.planner import plan
from arena.games.household.tasks import HELD_OUT, IN_DOMAIN, TASK_TYPES, draw_world_id, make_task, satisfied
from arena.games.household.types import HouseholdConfig
from arena.games.household.world import NOTHING

world_ids = st.integers(min_value=0, max_value=2**41)


@settings(max_examples=150, deadline=None)
@given(world_id=world_ids)
def test_every_task_is_solvable_within_the_step_limit_and_the_plan_succeeds(world_id: int) -> None:
    task, world = make_task(world_id, TASK_TYPES)
    assert not satisfied(world, task), "a task must not start solved"
    steps = plan(world, task, limit=30)
    assert steps is not None and 0 < len(steps) <= 30, f"world {world_id} ({task.type}): no plan within 30 steps"
    for action in steps:
        assert action in world.admissible()
        assert world.step(action) != NOTHING
    assert satisfied(world, task)


@settings(max_examples=60, deadline=None)
@given(world_id=world_ids, walk=st.lists(st.integers(min_value=0, max_value=10**6), max_size=12), junk=st.text(max_size=60))
def test_every_admissible_action_is_accepted_and_every_other_string_rejected(world_id: int, walk: list[int], junk: str) -> None:
    _, world = make_task(world_id, TASK_TYPES)
    for k in walk:  # a random state: a walk of admissible moves
        moves = list(world.admissible())
        world.step(moves[k % len(moves)])
    moves = world.admissible()
    for action in moves:
        assert parse_action(format_action(action), moves) == action
        assert parse_action(format_action(action.upper() + "."), moves) == action
        assert isinstance(parse_action(f"<action>{action}</action>", moves), Invalid)  # no <think>
        assert parse_action(f"<action>{action}</action>", moves, require_think=False) == action
    for text in (junk, format_action(junk), f"<think></think><action>{junk}</action>", junk + "<action>"):
        got = parse_action(text, moves)
        assert isinstance(got, Invalid) or got in moves
        if normalise(junk) not in moves:
            assert isinstance(got, Invalid)
    if junk not in moves:  # the world itself ignores what is not admissible
        assert world.copy().step(junk) == NOTHING


def test_put_reads_in_and_on_as_alfworlds_in_on() -> None:
    assert normalise("  Put Apple 1 ON countertop 1. ") == "put apple 1 in/on countertop 1"
    assert normalise("put apple 1 in fridge 1") == "put apple 1 in/on fridge 1"


def test_the_split_separates_worlds_and_task_types() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    assert all(draw_world_id(rng, "train") % 2 == 0 for _ in range(100))
    assert all(draw_world_id(rng, "eval") % 2 == 1 for _ in range(100))
    assert {make_task(i, IN_DOMAIN)[0].type for i in range(200)} == set(IN_DOMAIN)
    assert {make_task(i, HELD_OUT)[0].type for i in range(200)} == set(HELD_OUT)
    a, b = make_task(12345, TASK_TYPES), make_task(12345, TASK_TYPES)
    assert a[0] == b[0] and a[1].key() == b[1].key() and a[1].receptacles == b[1].receptacles
    game = HouseholdGame(split="eval", task_types="held_out", attempts=1)
    for seed in range(10):
        game.reset(seed=seed)
        assert game.task.world_id % 2 == 1 and game.task.type in HELD_OUT


def _play(game: HouseholdGame, texts: dict[str, list[str]]) -> None:
    cursor = {s: 0 for s in game.possible_agents}
    for seat in game.agent_iter(max_iter=10_000):
        _, _, term, trunc, _ = game.last()
        if term or trunc:
            game.step(None)
            continue
        pool = texts[seat]
        game.step(pool[min(cursor[seat], len(pool) - 1)])
        cursor[seat] += 1


def test_planned_attempts_score_one_and_invalid_ones_run_out_of_steps() -> None:
    game = HouseholdGame(attempts=3, max_steps=30)
    game.reset(seed=7)
    task, world = game.current_task()
    steps = plan(world, task)
    assert steps
    texts = {
        "agent_0": [format_action(a) for a in steps],
        "agent_1": ["<action>" + steps[0] + "</action>"] + [format_action(a) for a in steps],  # one invalid first
        "agent_2": ["I am not sure what to do."],
    }
    _play(game, texts)
    ep = game.episode()
    assert ep.rewards["agent_0"] == pytest.approx(1.0)
    assert ep.rewards["agent_1"] == pytest.approx(0.9)
    assert ep.rewards["agent_2"] == pytest.approx(-0.1 * 30)
    assert [game.seat_status(s) for s in game.possible_agents] == ["solved", "solved", "out_of_steps"]
    assert len(ep.turns_of(seat="agent_0")) == len(steps) and len(ep.turns_of(seat="agent_2")) == 30
    assert ep.metrics["success_rate"] == pytest.approx(2 / 3) and ep.metrics["out_of_steps_rate"] == pytest.approx(1 / 3)
    assert ep.info["out_of_steps"] == "agent_2" and not ep.truncated
    assert ep.outcome["agent_0"].rank == 1 and ep.outcome["agent_2"].rank == 3
    # the invalid step is shown in the history and answered with "Nothing happens."
    second = ep.turns_of(seat="agent_1")[1].messages[0]["content"]
    assert NOTHING in second and "Prior to this step, you have already taken 1 step(s)" in second


def test_attempts_see_the_same_world_and_batch_in_one_phase() -> None:
    game = HouseholdGame(attempts=4)
    game.reset(seed=3)
    assert game.pending_seats() == [f"agent_{i}" for i in range(4)]
    first = {game.observe(s).observation for s in game.possible_agents}
    assert len(first) == 1 and {game.observe(s).task for s in game.possible_agents} == {game.task.description}
    assert game.group_keys("agent_0", "act")["episode"] == game.group_keys("agent_3", "act")["episode"]


def test_student_skills_teacher_and_no_skill_probes() -> None:
    game = HouseholdGame(attempts=2, skills={"probes": True, "k": 3})
    game.reset(seed=1)
    student = game.observe("agent_0")
    assert len(student.skills) == 3
    probes = game.probe_prompts("agent_0")
    teacher, bare = probes["teacher"][0]["content"], probes["no_skill"][0]["content"]
    prompt = game.prompt("agent_0")[0]["content"]
    assert "Retrieved relevant experience" in prompt and "Retrieved relevant experience" not in bare
    assert all(s in teacher for s in student.skills) and "Carry one object at a time" in teacher
    tail = prompt.split("You are now at step", 1)[1]  # the same state in all three contexts
    assert tail in teacher and tail in bare
    game.step(format_action("look"))
    assert game.turns[0].probes == probes


def test_held_out_types_get_no_skills_of_their_own_type() -> None:
    from arena.games.household.skills import load_library

    typed = {s.task_type for s in load_library() if s.kind == "task"}
    assert typed == set(IN_DOMAIN)


def test_config_errors_are_one_line() -> None:
    with pytest.raises(ValueError, match="receptacles"):
        HouseholdConfig(receptacles=(5, 3))
    with pytest.raises(ValueError, match="task_types"):
        HouseholdConfig(task_types=["boil"])
    with pytest.raises(ValueError, match="cannot read skills"):
        HouseholdGame(skills={"library": "/nonexistent.json"})


@pytest.mark.parametrize("bot", sorted(BOTS))
def test_kit_passes_with_small_g_and_probes(bot: str) -> None:
    check_game(lambda: HouseholdGame(attempts=2, max_steps=8, skills={"probes": True}), bot=BOTS[bot], seeds=(0,))
