"""The household world: a procedurally generated room in ALFWorld's mould, as pure rules.

A :class:`World` is one room (kitchen, living room, bedroom or bathroom) full of
numbered receptacles (``cabinet 2``, ``countertop 1``; some open and close) and
numbered objects (``apple 1``) lying in or on them. The agent stands at one
receptacle at a time (``go to X`` moves it) and carries at most one object.
Objects have states (hot, cold, clean, sliced); a desk lamp is lit by ``use``.
Appliances: ``microwave`` heats, ``fridge`` cools, ``sinkbasin`` cleans.

Every legal move is listed by :meth:`World.admissible`, a mapping from the
action's text (ALFWorld's grammar) to the move; :meth:`World.step` applies one
and returns ALFWorld's style of feedback. Text that is not admissible changes
nothing ("Nothing happens."). Nothing here draws random numbers except
:func:`generate`, from the generator it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

NOTHING = "Nothing happens."

#: receptacle kinds per room: (kind, most copies); appliances are receptacles too.
ROOMS: dict[str, tuple[tuple[str, int], ...]] = {
    "kitchen": (
        ("cabinet", 4), ("countertop", 2), ("drawer", 3), ("fridge", 1), ("microwave", 1), ("sinkbasin", 1),
        ("stoveburner", 2), ("diningtable", 1), ("shelf", 2), ("garbagecan", 1), ("coffeemachine", 1), ("toaster", 1),
    ),
    "livingroom": (
        ("sofa", 1), ("armchair", 1), ("coffeetable", 1), ("sidetable", 2), ("tvstand", 1), ("drawer", 3),
        ("cabinet", 2), ("shelf", 2), ("garbagecan", 1), ("diningtable", 1),
    ),
    "bedroom": (
        ("bed", 1), ("desk", 1), ("drawer", 4), ("dresser", 1), ("shelf", 3), ("sidetable", 2), ("garbagecan", 1),
        ("safe", 1), ("laundryhamper", 1),
    ),
    "bathroom": (
        ("countertop", 1), ("cabinet", 3), ("drawer", 2), ("sinkbasin", 1), ("toilet", 1), ("bathtubbasin", 1),
        ("towelholder", 1), ("garbagecan", 1), ("shelf", 2), ("handtowelholder", 1),
    ),
}
OPENABLE = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})
#: receptacles the generator never uses as a task's destination nor fills at the start.
APPLIANCES = frozenset({"fridge", "microwave", "sinkbasin", "toaster", "coffeemachine", "stoveburner", "garbagecan"})
APPLIANCE_FOR = {"heat": "microwave", "cool": "fridge", "clean": "sinkbasin"}
#: object kinds per room (what may lie around at the start).
OBJECTS: dict[str, tuple[str, ...]] = {
    "kitchen": (
        "apple", "bread", "egg", "lettuce", "potato", "tomato", "mug", "cup", "plate", "bowl", "pan", "pot",
        "fork", "knife", "spoon", "spatula", "ladle", "kettle", "winebottle", "saltshaker", "peppershaker",
        "dishsponge", "soapbottle", "butterknife",
    ),
    "livingroom": (
        "book", "box", "cellphone", "creditcard", "keychain", "laptop", "newspaper", "pillow", "remotecontrol",
        "statue", "vase", "watch", "bowl", "plate", "desklamp",
    ),
    "bedroom": (
        "alarmclock", "book", "cd", "cellphone", "creditcard", "keychain", "laptop", "pen", "pencil", "pillow",
        "cloth", "bowl", "mug", "desklamp",
    ),
    "bathroom": ("soapbar", "cloth", "toiletpaper", "spraybottle", "candle", "soapbottle", "dishsponge", "towel"),
}
HEATABLE = frozenset({"apple", "bread", "egg", "potato", "tomato", "mug", "cup", "plate"})
COOLABLE = frozenset({"apple", "bread", "egg", "lettuce", "potato", "tomato", "mug", "cup", "plate", "pan", "pot", "winebottle"})
CLEANABLE = frozenset({"apple", "lettuce", "potato", "tomato", "mug", "cup", "plate", "bowl", "pan", "pot", "fork",
                       "knife", "spoon", "spatula", "ladle", "butterknife", "soapbar", "cloth", "dishsponge"})
SLICEABLE = frozenset({"apple", "bread", "lettuce", "potato", "tomato"})
KNIVES = frozenset({"knife", "butterknife"})
LAMPS = frozenset({"desklamp"})
#: objects that stay where they are (a lamp is used where it stands).
FIXED = LAMPS


@lru_cache(maxsize=4096)
def kind(name: str) -> str:
    """``'apple 3' -> 'apple'``."""
    return name.rsplit(" ", 1)[0]


def _listing(names: list[str]) -> str:
    if not names:
        return "nothing"
    items = [f"a {n}" for n in names]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f", and {items[-1]}"


@dataclass
class World:
    """One room's full state. ``where[obj]`` is its receptacle, or ``None`` while held."""

    room: str
    receptacles: tuple[str, ...]
    where: dict[str, str | None]
    location: str | None = None
    holding: str | None = None
    opened: set[str] = field(default_factory=set)
    states: dict[str, frozenset[str]] = field(default_factory=dict)

    # ------------------------------------------------------------ queries
    def copy(self) -> World:
        return World(self.room, self.receptacles, dict(self.where), self.location, self.holding, set(self.opened),
                     dict(self.states))

    def key(self) -> tuple:
        """A hashable snapshot of everything that can change."""
        return (self.location, self.holding, frozenset(self.opened), tuple(sorted(self.where.items(), key=_none_last)),
                tuple(sorted((o, tuple(sorted(s))) for o, s in self.states.items() if s)))

    def has(self, obj: str, state: str) -> bool:
        return state in self.states.get(obj, frozenset())

    def accessible(self, recep: str) -> bool:
        return kind(recep) not in OPENABLE or recep in self.opened

    def contents(self, recep: str) -> list[str]:
        return [o for o, r in self.where.items() if r == recep]

    def objects(self) -> list[str]:
        return list(self.where)

    # ------------------------------------------------------------ rendering
    def describe(self, recep: str) -> str:
        if not self.accessible(recep):
            return f"The {recep} is closed."
        items = _listing(self.contents(recep))
        if kind(recep) in OPENABLE:
            return f"The {recep} is open. In it, you see {items}."
        return f"On the {recep}, you see {items}."

    def intro(self) -> str:
        return (f"You are in the middle of a room. Looking quickly around you, you see "
                f"{_listing(list(self.receptacles))}.")

    def _state_words(self, obj: str) -> str:
        words = [w for w in ("hot", "cold", "clean", "sliced", "lit") if self.has(obj, w)]
        return f"This is a {' '.join(words)} {kind(obj)}." if words else f"This is a normal {kind(obj)}."

    # ------------------------------------------------------------ moves
    def admissible(self) -> dict[str, tuple[str, ...]]:
        """Every legal move now: its text (ALFWorld's grammar) -> ``(verb, *arguments)``."""
        moves: dict[str, tuple[str, ...]] = {}
        here = self.location
        for r in self.receptacles:
            if r != here:
                moves[f"go to {r}"] = ("go", r)
        if here is not None:
            k = kind(here)
            if k in OPENABLE:
                if here in self.opened:
                    moves[f"close {here}"] = ("close", here)
                else:
                    moves[f"open {here}"] = ("open", here)
            if self.accessible(here):
                for o in self.contents(here):
                    if kind(o) in LAMPS:
                        moves[f"use {o}"] = ("use", o)
                    elif self.holding is None:
                        moves[f"take {o} from {here}"] = ("take", o, here)
                    elif kind(self.holding) in KNIVES and kind(o) in SLICEABLE and not self.has(o, "sliced"):
                        moves[f"slice {o} with {self.holding}"] = ("slice", o, self.holding)
                if self.holding is not None:
                    moves[f"put {self.holding} in/on {here}"] = ("put", self.holding, here)
            held = self.holding
            if held is not None:
                for verb, appliance in APPLIANCE_FOR.items():
                    if k == appliance:
                        moves[f"{verb} {held} with {here}"] = (verb, held, here)
            moves[f"examine {here}"] = ("examine", here)
        if self.holding is not None:
            moves[f"examine {self.holding}"] = ("examine", self.holding)
        moves["inventory"] = ("inventory",)
        moves["look"] = ("look",)
        return moves

    def step(self, text: str) -> str:
        """Apply the admissible move named ``text``; anything else changes nothing."""
        move = self.admissible().get(text)
        return NOTHING if move is None else self.apply(move)

    def apply(self, move: tuple[str, ...]) -> str:
        """Apply a move taken from :meth:`admissible` (not re-checked); return the feedback."""
        verb, *args = move
        if verb == "go":
            self.location = args[0]
            return f"You arrive at {args[0]}. " + self.describe(args[0])
        if verb == "open":
            self.opened.add(args[0])
            return f"You open the {args[0]}. " + self.describe(args[0])
        if verb == "close":
            self.opened.discard(args[0])
            return f"You close the {args[0]}."
        if verb == "take":
            self.where[args[0]] = None
            self.holding = args[0]
            return f"You pick up the {args[0]} from the {args[1]}."
        if verb == "put":
            self.where[args[0]] = args[1]
            self.holding = None
            return f"You put the {args[0]} in/on the {args[1]}."
        if verb in ("heat", "cool", "clean"):
            state = {"heat": "hot", "cool": "cold", "clean": "clean"}[verb]
            drop = {"hot": "cold", "cold": "hot"}.get(state)
            self.states[args[0]] = (self.states.get(args[0], frozenset()) - {drop}) | {state}
            return f"You {verb} the {args[0]} using the {args[1]}."
        if verb == "slice":
            self.states[args[0]] = self.states.get(args[0], frozenset()) | {"sliced"}
            return f"You slice the {args[0]} with the {args[1]}."
        if verb == "use":
            lit = self.has(args[0], "lit")
            self.states[args[0]] = self.states.get(args[0], frozenset()) ^ {"lit"}
            return f"You turn {'off' if lit else 'on'} the {args[0]}."
        if verb == "examine":
            return self._state_words(args[0]) if args[0] in self.where else self.describe(args[0])
        if verb == "inventory":
            return f"You are carrying: a {self.holding}." if self.holding else "You are not carrying anything."
        # look
        if self.location is None:
            return self.intro()
        return f"You are facing the {self.location}. Next to it, you see nothing."


def _none_last(item: tuple[str, str | None]) -> tuple[str, str]:
    return (item[0], item[1] or "")


def generate(room: str, rng: np.random.Generator, receptacles: tuple[int, int] = (6, 12),
             objects: tuple[int, int] = (6, 12), must_have: tuple[str, ...] = (),
             must_receptacles: tuple[str, ...] = ()) -> World:
    """A random room of kind ``room``.

    ``receptacles`` / ``objects``: inclusive ranges of how many. ``must_receptacles``
    (kinds) are always present; ``must_have`` (object kinds, repeats allowed) are
    always among the objects. Objects start in or on non-appliance receptacles,
    openable ones closed; nothing starts hot, cold, clean, sliced or lit.
    """
    kinds = ROOMS[room]
    lo, hi = receptacles
    n_recep = int(rng.integers(lo, hi + 1))
    pool = [f"{k} {i}" for k, most in kinds for i in range(1, most + 1)]
    chosen = [f"{k} 1" for k in dict.fromkeys(must_receptacles)]
    rest = [p for p in pool if p not in chosen]
    order = rng.permutation(len(rest))
    chosen += [rest[int(i)] for i in order[: max(0, n_recep - len(chosen))]]
    if not any(kind(r) not in APPLIANCES for r in chosen):
        chosen.append(next(p for p in pool if kind(p) not in APPLIANCES))
    recep = tuple(sorted(chosen, key=lambda r: (kind(r), int(r.rsplit(" ", 1)[1]))))
    holders = [r for r in recep if kind(r) not in APPLIANCES]
    lo, hi = objects
    n_obj = max(int(rng.integers(lo, hi + 1)), len(must_have))
    names = list(must_have)
    choices = OBJECTS[room]
    while len(names) < n_obj:
        names.append(choices[int(rng.integers(len(choices)))])
    counts: dict[str, int] = {}
    where: dict[str, str | None] = {}
    for k in names:
        counts[k] = counts.get(k, 0) + 1
        where[f"{k} {counts[k]}"] = holders[int(rng.integers(len(holders)))]
    # A stable order: by where they lie, then by name, so listings read naturally.
    where = dict(sorted(where.items(), key=lambda kv: (recep.index(kv[1]), kind(kv[0]), kv[0])))  # type: ignore[arg-type]
    return World(room=room, receptacles=recep, where=where)
