"""The household ``seeker`` bot (arena/games/household/bots.py): it reads the task and solves some of them."""

from __future__ import annotations

from arena.runner import Runner, SeatMap
from arena.games.household.bots import read_task
from arena.games.household.env import HouseholdGame
from arena.games.household.types import HouseholdConfig
from arena.policies.scripted import ScriptedPolicy, make_bot


def test_read_task_knows_every_phrase() -> None:
    assert read_task("put a clean dishsponge in/on drawer.") == ("clean", "dishsponge", "drawer")
    assert read_task("cool some apple and put it in countertop.") == ("cool", "apple", "countertop")
    assert read_task("put some book on sofa.") == ("pick_and_place", "book", "sofa")
    assert read_task("find two pen and put them in desk.") == ("pick_two", "pen", "desk")
    assert read_task("look at cd under the desklamp.") == ("examine", "cd", "desklamp")
    assert read_task("dance.") is None


def _success(bot: str, n: int = 12) -> float:
    cfg = HouseholdConfig(attempts=1, max_steps=8, receptacles=(4, 6), objects=(3, 6), require_think=False,
                          action_prefix="<action>")
    runner = Runner(lambda: HouseholdGame(cfg), {"b": ScriptedPolicy(make_bot(HouseholdGame, bot))}, SeatMap({"*": "b"}))
    episodes = runner.play(list(range(n)))
    if bot == "seeker_action":  # valid with the reply opened by <action> (the think-first bots are not)
        assert all(t.valid for ep in episodes for t in ep.turns)
    return sum(ep.metrics["success_rate"] for ep in episodes) / n


def test_the_seeker_solves_tasks_the_random_bot_does_not() -> None:
    assert _success("seeker_action") >= 0.25 > _success("random_admissible")
