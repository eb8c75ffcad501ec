"""ALFWorld's six task types, their goals, and the seeded train/eval split of worlds.

======  ==================  ====================================  ===========
ALFWorld  name              goal                                  split
======  ==================  ====================================  ===========
1       ``pick_and_place``  an O lies in/on an R                  in-domain
2       ``examine``         holding an O at a lit desk lamp       held-out
3       ``clean``           a clean O lies in/on an R             in-domain
4       ``heat``            a hot O lies in/on an R               held-out
5       ``cool``            a cold O lies in/on an R              in-domain
6       ``pick_two``        two O lie in/on one R                 held-out
======  ==================  ====================================  ===========

A task and its world are a pure function of a **world id**: :func:`make_task`
seeds a generator with it. Training worlds have even ids and evaluation worlds
odd ids (:func:`draw_world_id`), so training never sees an evaluation world.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from arena.games.household.world import (
    APPLIANCE_FOR, APPLIANCES, CLEANABLE, COOLABLE, FIXED, HEATABLE, LAMPS, OBJECTS, ROOMS, World, generate, kind,
)

TaskType = Literal["pick_and_place", "examine", "clean", "heat", "cool", "pick_two"]
TASK_TYPES: tuple[TaskType, ...] = ("pick_and_place", "examine", "clean", "heat", "cool", "pick_two")
IN_DOMAIN: tuple[TaskType, ...] = ("pick_and_place", "clean", "cool")
HELD_OUT: tuple[TaskType, ...] = ("examine", "heat", "pick_two")
TASK_SETS: dict[str, tuple[TaskType, ...]] = {"in_domain": IN_DOMAIN, "held_out": HELD_OUT, "all": TASK_TYPES}
#: the state a task's object must have: clean -> "clean", heat -> "hot", cool -> "cold".
NEEDED_STATE = {"clean": "clean", "heat": "hot", "cool": "cold"}
_ROOMS_FOR: dict[str, tuple[str, ...]] = {
    "pick_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "pick_two": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "examine": ("livingroom", "bedroom"),
    "clean": ("kitchen", "bathroom"),
    "heat": ("kitchen",),
    "cool": ("kitchen",),
}
_OBJECTS_FOR = {"clean": CLEANABLE, "heat": HEATABLE, "cool": COOLABLE}
_PHRASES: dict[str, tuple[str, ...]] = {
    "pick_and_place": ("put a {o} in/on {r}.", "put some {o} on {r}."),
    "examine": ("look at {o} under the {r}.", "examine the {o} with the {r}."),
    "clean": ("put a clean {o} in/on {r}.", "clean some {o} and put it in {r}."),
    "heat": ("put a hot {o} in/on {r}.", "heat some {o} and put it in {r}."),
    "cool": ("put a cool {o} in/on {r}.", "cool some {o} and put it in {r}."),
    "pick_two": ("put two {o} in/on {r}.", "find two {o} and put them in {r}."),
}


@dataclass(frozen=True)
class Task:
    """What to achieve: ``obj`` and ``target`` are kinds (``target`` is the lamp kind for examine)."""

    type: TaskType
    obj: str
    target: str
    description: str
    world_id: int


def draw_world_id(rng: np.random.Generator, split: Literal["train", "eval"]) -> int:
    """A world id of the split: even for training, odd for evaluation."""
    return 2 * int(rng.integers(2**40)) + (1 if split == "eval" else 0)


def satisfied(world: World, task: Task) -> bool:
    """Whether the world meets the task's goal now."""
    if task.type == "examine":
        held = world.holding
        here = world.location
        return (held is not None and kind(held) == task.obj and here is not None
                and any(kind(o) in LAMPS and world.has(o, "lit") for o in world.contents(here)))
    need = NEEDED_STATE.get(task.type)
    placed: dict[str, int] = {}
    prefix = task.obj + " "
    for o, r in world.where.items():
        if (r is not None and o.startswith(prefix) and kind(o) == task.obj and kind(r) == task.target
                and (need is None or world.has(o, need))):
            placed[r] = placed.get(r, 0) + 1
    return any(n >= (2 if task.type == "pick_two" else 1) for n in placed.values())


def make_task(world_id: int, types: tuple[TaskType, ...], receptacles: tuple[int, int] = (6, 12),
              objects: tuple[int, int] = (6, 12)) -> tuple[Task, World]:
    """The task and starting world of ``world_id``, its type drawn from ``types``."""
    rng = np.random.default_rng(world_id)
    ttype = types[int(rng.integers(len(types)))]
    rooms = _ROOMS_FOR[ttype]
    room = rooms[int(rng.integers(len(rooms)))]
    movable = [o for o in OBJECTS[room] if o not in FIXED]
    allowed = _OBJECTS_FOR.get(ttype)
    candidates = [o for o in movable if allowed is None or o in allowed]
    obj = candidates[int(rng.integers(len(candidates)))]
    if ttype == "examine":
        target = "desklamp"
        must_have: tuple[str, ...] = (obj, target)
        must_recep: tuple[str, ...] = ()
    else:
        spots = sorted({k for k, _ in ROOMS[room] if k not in APPLIANCES})
        target = spots[int(rng.integers(len(spots)))]
        must_have = (obj, obj) if ttype == "pick_two" else (obj,)
        appliance = APPLIANCE_FOR.get(ttype)
        must_recep = (target,) + ((appliance,) if appliance else ())
    world = generate(room, rng, receptacles, objects, must_have, must_recep)
    _move_off_target(world, obj, target, rng)
    phrases = _PHRASES[ttype]
    text = phrases[int(rng.integers(len(phrases)))].format(o=obj, r=target)
    return Task(ttype, obj, target, text, world_id), world


def _move_off_target(world: World, obj: str, target: str, rng: np.random.Generator) -> None:
    """No object of the task's kind starts in/on a target receptacle (the task would be done or half done)."""
    others = [r for r in world.receptacles if kind(r) not in APPLIANCES and kind(r) != target]
    if not others:  # every place to put things is a target: add one that is not
        extra = next(f"{k} 1" for k, _ in ROOMS[world.room] if k not in APPLIANCES and k != target)
        world.receptacles = tuple(sorted((*world.receptacles, extra)))
        others = [extra]
    for o, r in list(world.where.items()):
        if r is not None and kind(o) == obj and kind(r) == target:
            world.where[o] = others[int(rng.integers(len(others)))]
