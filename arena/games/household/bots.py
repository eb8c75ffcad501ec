"""Scripted household players for tests, demos and baselines.

* ``random_admissible`` (``default``): a uniformly random admissible action.
* ``explorer``: goes to each receptacle in turn, opening closed ones; takes
  nothing, so it never solves a task; a baseline of valid but aimless play.
* ``seeker``: reads only what the model sees (the task, the admissible actions and the
  recent history) and plays the task's obvious plan: put the held object when at the
  target (after the task's appliance verb, seen in the history), use the appliance when
  there, go to the appliance or the target when holding the object, take an object of
  the task's kind when it lies here, open what is closed, else visit the receptacles in
  turn. No world oracle, so it fails some tasks (the appliance step falls out of a short
  history, a second object for pick_two); the warm start keeps its successful attempts
  (``min_reward``) as demonstrations.

``seeker_action`` writes only what follows an opened ``<action>``: ``go to shelf 1</action>``,
the reply a config with ``require_think: false`` and ``action_prefix: "<action>"`` asks for
(household.yaml's).
"""

from __future__ import annotations

import re

import numpy as np

from arena.games.household.actions import format_action
from arena.games.household.types import HouseholdObservation


def random_admissible(obs: HouseholdObservation, rng: np.random.Generator) -> str:
    moves = obs.admissible or ("look",)
    return format_action(moves[int(rng.integers(len(moves)))], "I pick an admissible action.")


def explorer(obs: HouseholdObservation, rng: np.random.Generator) -> str:
    opens = [m for m in obs.admissible if m.startswith("open ")]
    goes = [m for m in obs.admissible if m.startswith("go to ")]
    move = opens[0] if opens else goes[obs.step % len(goes)] if goes else "look"
    return format_action(move, "I search the room.")


_TASK = [
    (re.compile(r"^put two (\w+) in/on (\w+)\.|^find two (\w+) and put them in (\w+)\."), "pick_two"),
    (re.compile(r"^put a clean (\w+) in/on (\w+)\.|^clean some (\w+) and put it in (\w+)\."), "clean"),
    (re.compile(r"^put a hot (\w+) in/on (\w+)\.|^heat some (\w+) and put it in (\w+)\."), "heat"),
    (re.compile(r"^put a cool (\w+) in/on (\w+)\.|^cool some (\w+) and put it in (\w+)\."), "cool"),
    (re.compile(r"^look at (\w+) under the (\w+)\.|^examine the (\w+) with the (\w+)\."), "examine"),
    (re.compile(r"^put a (\w+) in/on (\w+)\.|^put some (\w+) on (\w+)\."), "pick_and_place"),
]
_APPLIANCE = {"clean": ("clean", "sinkbasin"), "heat": ("heat", "microwave"), "cool": ("cool", "fridge")}


def read_task(task: str) -> tuple[str, str, str] | None:
    """``(type, object kind, target kind)`` of a task sentence (arena/games/household/tasks.py's phrases)."""
    for pattern, kind in _TASK:
        m = pattern.match(task.strip())
        if m:
            obj, target = [g for g in m.groups() if g is not None]
            return kind, obj, target
    return None


def _kind(name: str) -> str:
    return name.rsplit(" ", 1)[0]


def seek(obs: HouseholdObservation) -> str:
    """The seeker's move (see the module)."""
    adm = obs.admissible or ("look",)
    read = read_task(obs.task)
    if read is None:
        return adm[obs.step % len(adm)]
    kind, obj, target = read
    verb, appliance = _APPLIANCE.get(kind, ("", ""))
    done = [a for _, a in obs.history]
    treated = not verb or any(a.startswith(f"{verb} ") for a in done)
    held = [a.removeprefix("examine ") for a in adm if a.startswith("examine ") and _kind(a.removeprefix("examine ")) == obj]
    goes = [a for a in adm if a.startswith("go to ")]
    if kind == "examine":
        lamp = [a for a in adm if a.startswith("use ")]
        if held and lamp:
            return lamp[0]
    for a in adm:
        if a.startswith("put ") and _kind(a.split(" in/on ")[0].removeprefix("put ")) == obj and _kind(a.split(" in/on ")[1]) == target:
            if treated:
                return a
    if verb and not treated:
        for a in adm:
            if a.startswith(f"{verb} ") and _kind(a.split(" with ")[0].removeprefix(f"{verb} ")) == obj:
                return a
    if held:
        want = appliance if verb and not treated else target if kind != "examine" else None
        for a in goes:
            if want and _kind(a.removeprefix("go to ")) == want:
                return a
    else:
        for a in adm:
            if a.startswith("take ") and _kind(a.removeprefix("take ").split(" from ")[0]) == obj:
                if not (kind == "pick_two" and _kind(a.split(" from ")[1]) == target):
                    return a
    opens = [a for a in adm if a.startswith("open ")]
    if opens:
        return opens[0]
    return goes[obs.step % len(goes)] if goes else "look"


def seeker(obs: HouseholdObservation, rng: np.random.Generator) -> str:
    return format_action(seek(obs), "I follow the task's plan.")


def seeker_action(obs: HouseholdObservation, rng: np.random.Generator) -> str:
    return f"{seek(obs)}</action>"


BOTS = {"random_admissible": random_admissible, "explorer": explorer, "default": random_admissible,
        "seeker": seeker, "seeker_action": seeker_action}
