"""Breadth-first search over the household world: the shortest plan for a task.

The planner sees the true world (an oracle, like ALFWorld's expert) and expands
only the moves that can matter for the task: going to receptacles that hold an
object of the task's kind, to targets, to the needed appliance or to a lamp;
opening; taking an object of the task's kind; putting at a target; the task's
appliance verb; using a lamp. Every move it plays is taken from
:meth:`World.admissible`, so its plan is a plan of the real game, and breadth
first makes it a shortest one among those moves.
"""

from __future__ import annotations

from collections import deque

from arena.games.household.tasks import NEEDED_STATE, Task, satisfied
from arena.games.household.world import APPLIANCE_FOR, LAMPS, World, kind

_VERB = {"clean": "clean", "heat": "heat", "cool": "cool"}


def _useful(world: World, task: Task, move: tuple[str, ...]) -> bool:
    verb = move[0]
    if verb == "go":
        r = move[1]
        k = kind(r)
        if k == task.target or k == APPLIANCE_FOR.get(task.type):
            return True
        return any(kind(o) == task.obj or (task.type == "examine" and kind(o) in LAMPS) for o in world.contents(r))
    if verb == "open":
        return True
    if verb == "take":
        return kind(move[1]) == task.obj
    if verb == "put":
        return task.type != "examine" and kind(move[2]) == task.target
    if verb in ("heat", "cool", "clean"):
        return _VERB.get(task.type) == verb and NEEDED_STATE[task.type] not in world.states.get(move[1], frozenset())
    if verb == "use":
        return task.type == "examine" and not world.has(move[1], "lit")
    return False


def plan(world: World, task: Task, limit: int = 30) -> list[str] | None:
    """The shortest list of action texts that achieves ``task`` from ``world`` (at most ``limit``), or None."""
    if satisfied(world, task):
        return []
    start = world.copy()
    frontier: deque[tuple[World, list[str]]] = deque([(start, [])])
    seen = {start.key()}
    while frontier:
        state, path = frontier.popleft()
        if len(path) >= limit:
            continue
        for text, move in state.admissible().items():
            if not _useful(state, task, move):
                continue
            nxt = state.copy()
            nxt.apply(move)
            key = nxt.key()
            if key in seen:
                continue
            seen.add(key)
            steps = [*path, text]
            if satisfied(nxt, task):
                return steps
            frontier.append((nxt, steps))
    return None
