"""The household world's rules (arena/games/household/world.py) and task checks (tasks.py) by hand.

A small hand-built kitchen and living room: the exact admissible moves in each
state, ALFWorld's exact feedback for each verb, the state each move leaves, the
generator's guarantees, and the task success checks on worlds one move apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.household.tasks import Task, draw_world_id, satisfied
from arena.games.household.world import APPLIANCES, NOTHING, OBJECTS, OPENABLE, ROOMS, World, _listing, generate, kind


def kitchen() -> World:
    return World(
        room="kitchen",
        receptacles=("cabinet 1", "countertop 1", "fridge 1", "microwave 1", "sinkbasin 1"),
        where={"knife 1": "cabinet 1", "apple 1": "countertop 1", "mug 1": "countertop 1"},
    )


def living() -> World:
    return World(room="livingroom", receptacles=("sidetable 1", "sofa 1"),
                 where={"desklamp 1": "sidetable 1", "book 1": "sofa 1"})


GO = {"go to cabinet 1": ("go", "cabinet 1"), "go to countertop 1": ("go", "countertop 1"),
      "go to fridge 1": ("go", "fridge 1"), "go to microwave 1": ("go", "microwave 1"),
      "go to sinkbasin 1": ("go", "sinkbasin 1")}  # fmt: skip
ALWAYS = {"inventory": ("inventory",), "look": ("look",)}


def _go_except(here: str) -> dict[str, tuple[str, ...]]:
    return {t: m for t, m in GO.items() if m[1] != here}


# ------------------------------------------------------------------ small helpers
def test_kind_and_listing() -> None:
    assert kind("apple 3") == "apple" and kind("cabinet 12") == "cabinet" and kind("a b 2") == "a b"
    assert _listing([]) == "nothing"
    assert _listing(["apple 1"]) == "a apple 1"
    assert _listing(["apple 1", "mug 2"]) == "a apple 1, and a mug 2"
    assert _listing(["x 1", "y 1", "z 1"]) == "a x 1, a y 1, and a z 1"


def test_queries_and_rendering() -> None:
    w = kitchen()
    assert w.intro() == ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, "
                         "a countertop 1, a fridge 1, a microwave 1, and a sinkbasin 1.")
    assert w.describe("cabinet 1") == "The cabinet 1 is closed."
    assert w.describe("countertop 1") == "On the countertop 1, you see a apple 1, and a mug 1."
    assert w.describe("sinkbasin 1") == "On the sinkbasin 1, you see nothing."
    w.opened.add("cabinet 1")
    assert w.describe("cabinet 1") == "The cabinet 1 is open. In it, you see a knife 1."
    assert w.describe("fridge 1") == "The fridge 1 is closed."
    assert w.accessible("cabinet 1") and not w.accessible("fridge 1") and w.accessible("countertop 1")
    assert w.contents("countertop 1") == ["apple 1", "mug 1"] and w.contents("fridge 1") == []
    assert w.objects() == ["knife 1", "apple 1", "mug 1"]
    w.states["apple 1"] = frozenset({"sliced", "clean", "hot"})
    assert w.has("apple 1", "hot") and not w.has("apple 1", "cold") and not w.has("mug 1", "hot")
    assert w.apply(("examine", "apple 1")) == "This is a hot clean sliced apple."
    assert w.apply(("examine", "mug 1")) == "This is a normal mug."
    w.states["mug 1"] = frozenset({"cold"})
    assert w.apply(("examine", "mug 1")) == "This is a cold mug."
    lamp = living()
    lamp.states["desklamp 1"] = frozenset({"lit"})
    assert lamp.apply(("examine", "desklamp 1")) == "This is a lit desklamp."


def test_copy_and_key() -> None:
    w = kitchen()
    w.location, w.holding = "countertop 1", "knife 1"
    w.where["knife 1"] = None
    w.opened.add("cabinet 1")
    w.states["apple 1"] = frozenset({"hot"})
    w.states["mug 1"] = frozenset()
    c = w.copy()
    assert c == w and c.key() == w.key()
    assert w.key() == ("countertop 1", "knife 1", frozenset({"cabinet 1"}),
                       (("apple 1", "countertop 1"), ("knife 1", None), ("mug 1", "countertop 1")),
                       (("apple 1", ("hot",)),))  # fmt: skip
    c.where["apple 1"] = "cabinet 1"
    c.opened.add("fridge 1")
    c.states["apple 1"] = frozenset({"cold"})
    assert w.where["apple 1"] == "countertop 1" and w.opened == {"cabinet 1"} and w.states["apple 1"] == {"hot"}
    assert c.key() != w.key()
    assert c.room == w.room and c.receptacles == w.receptacles


# ------------------------------------------------------------------ admissible moves
def test_admissible_at_the_start_and_at_a_closed_receptacle() -> None:
    w = kitchen()
    assert w.admissible() == {**GO, **ALWAYS}
    w.location = "cabinet 1"
    assert w.admissible() == {**_go_except("cabinet 1"), "open cabinet 1": ("open", "cabinet 1"),
                              "examine cabinet 1": ("examine", "cabinet 1"), **ALWAYS}  # fmt: skip


def test_admissible_take_put_and_close() -> None:
    w = kitchen()
    w.location = "cabinet 1"
    w.opened.add("cabinet 1")
    assert w.admissible() == {**_go_except("cabinet 1"), "close cabinet 1": ("close", "cabinet 1"),
                              "take knife 1 from cabinet 1": ("take", "knife 1", "cabinet 1"),
                              "examine cabinet 1": ("examine", "cabinet 1"), **ALWAYS}  # fmt: skip
    w.location, w.holding, w.where["knife 1"] = "countertop 1", "knife 1", None
    assert w.admissible() == {**_go_except("countertop 1"),
                              "slice apple 1 with knife 1": ("slice", "apple 1", "knife 1"),
                              "put knife 1 in/on countertop 1": ("put", "knife 1", "countertop 1"),
                              "examine countertop 1": ("examine", "countertop 1"),
                              "examine knife 1": ("examine", "knife 1"), **ALWAYS}  # fmt: skip
    w.states["apple 1"] = frozenset({"sliced"})
    assert "slice apple 1 with knife 1" not in w.admissible()
    w.holding = "mug 1"  # not a knife: nothing to slice, nothing to take while holding
    assert not any(t.startswith(("slice", "take")) for t in w.admissible())


def test_admissible_appliances_and_lamps() -> None:
    w = kitchen()
    w.location, w.holding, w.where["mug 1"] = "microwave 1", "mug 1", None
    moves = w.admissible()
    assert moves["heat mug 1 with microwave 1"] == ("heat", "mug 1", "microwave 1")  # closed: still heats
    assert "put mug 1 in/on microwave 1" not in moves and "open microwave 1" in moves
    assert not any(t.startswith(("cool", "clean")) for t in moves)
    w.location = "fridge 1"
    assert w.admissible()["cool mug 1 with fridge 1"] == ("cool", "mug 1", "fridge 1")
    w.location = "sinkbasin 1"
    moves = w.admissible()
    assert moves["clean mug 1 with sinkbasin 1"] == ("clean", "mug 1", "sinkbasin 1")
    assert moves["put mug 1 in/on sinkbasin 1"] == ("put", "mug 1", "sinkbasin 1") and "open sinkbasin 1" not in moves
    w.holding, w.where["mug 1"] = None, "countertop 1"
    assert not any(t.startswith("clean") for t in w.admissible())
    lamp = living()
    lamp.location = "sidetable 1"
    assert lamp.admissible() == {"go to sofa 1": ("go", "sofa 1"), "use desklamp 1": ("use", "desklamp 1"),
                                 "examine sidetable 1": ("examine", "sidetable 1"), **ALWAYS}  # fmt: skip
    lamp.holding, lamp.where["book 1"] = "book 1", None
    assert lamp.admissible()["use desklamp 1"] == ("use", "desklamp 1")  # a lamp is used, never taken


# ------------------------------------------------------------------ moves and feedback
def test_a_walkthrough_with_exact_feedback() -> None:
    w = kitchen()
    assert w.step("look") == w.intro()
    assert w.step("take knife 1 from cabinet 1") == NOTHING and w.holding is None
    assert w.step("go to cabinet 1") == "You arrive at cabinet 1. The cabinet 1 is closed."
    assert w.location == "cabinet 1"
    assert w.step("look") == "You are facing the cabinet 1. Next to it, you see nothing."
    assert w.step("open cabinet 1") == "You open the cabinet 1. The cabinet 1 is open. In it, you see a knife 1."
    assert w.opened == {"cabinet 1"}
    assert w.step("take knife 1 from cabinet 1") == "You pick up the knife 1 from the cabinet 1."
    assert (w.holding, w.where["knife 1"]) == ("knife 1", None)
    assert w.step("inventory") == "You are carrying: a knife 1."
    assert w.step("close cabinet 1") == "You close the cabinet 1." and w.opened == set()
    assert w.step("examine knife 1") == "This is a normal knife."
    assert w.step("go to countertop 1") == "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a mug 1."
    assert w.step("slice apple 1 with knife 1") == "You slice the apple 1 with the knife 1."
    assert w.states["apple 1"] == {"sliced"}
    assert w.step("put knife 1 in/on countertop 1") == "You put the knife 1 in/on the countertop 1."
    assert (w.holding, w.where["knife 1"]) == (None, "countertop 1")
    assert w.step("inventory") == "You are not carrying anything."
    assert w.step("examine countertop 1") == "On the countertop 1, you see a knife 1, a apple 1, and a mug 1."
    assert w.step("take mug 1 from countertop 1") == "You pick up the mug 1 from the countertop 1."
    assert w.step("go to fridge 1") == "You arrive at fridge 1. The fridge 1 is closed."
    assert w.step("cool mug 1 with fridge 1") == "You cool the mug 1 using the fridge 1." and w.states["mug 1"] == {"cold"}
    w.step("go to microwave 1")
    assert w.step("heat mug 1 with microwave 1") == "You heat the mug 1 using the microwave 1."
    assert w.states["mug 1"] == {"hot"}  # heating drops cold
    w.step("go to sinkbasin 1")
    assert w.step("clean mug 1 with sinkbasin 1") == "You clean the mug 1 using the sinkbasin 1."
    assert w.states["mug 1"] == {"hot", "clean"}  # cleaning keeps the temperature
    w.step("go to fridge 1")
    w.step("cool mug 1 with fridge 1")
    assert w.states["mug 1"] == {"cold", "clean"}
    assert w.step("put mug 1 in/on fridge 1") == NOTHING  # closed
    assert w.step("open fridge 1") == "You open the fridge 1. The fridge 1 is open. In it, you see nothing."
    assert w.step("put mug 1 in/on fridge 1") == "You put the mug 1 in/on the fridge 1."
    assert w.step("examine fridge 1") == "The fridge 1 is open. In it, you see a mug 1."


def test_slicing_keeps_states_and_the_lamp_toggles() -> None:
    w = kitchen()
    w.states["apple 1"] = frozenset({"clean"})
    assert w.apply(("slice", "apple 1", "knife 1")) == "You slice the apple 1 with the knife 1."
    assert w.states["apple 1"] == {"clean", "sliced"}
    lamp = living()
    lamp.location = "sidetable 1"
    lamp.states["desklamp 1"] = frozenset({"x"})
    assert lamp.step("use desklamp 1") == "You turn on the desklamp 1." and lamp.states["desklamp 1"] == {"x", "lit"}
    assert lamp.step("use desklamp 1") == "You turn off the desklamp 1." and lamp.states["desklamp 1"] == {"x"}
    fresh = living()
    assert fresh.apply(("use", "desklamp 1")) == "You turn on the desklamp 1." and fresh.has("desklamp 1", "lit")
    assert fresh.where["desklamp 1"] == "sidetable 1" and fresh.holding is None


# ------------------------------------------------------------------ the generator
def test_generate_small_cases_by_hand() -> None:
    rng = np.random.default_rng(0)
    w = generate("kitchen", rng, receptacles=(1, 1), objects=(2, 2), must_have=("apple",), must_receptacles=("fridge",))
    assert w.receptacles == ("cabinet 1", "fridge 1")  # only an appliance chosen: the first holder is added
    assert set(w.where.values()) == {"cabinet 1"} and "apple 1" in w.where and len(w.where) == 2
    three = generate("bedroom", np.random.default_rng(1), receptacles=(1, 1), objects=(1, 1),
                     must_have=("pen", "pen", "book"), must_receptacles=("shelf", "drawer", "shelf", "bed"))
    assert three.receptacles == ("bed 1", "drawer 1", "shelf 1")  # musts beyond the range, deduplicated
    assert sorted(three.where) == ["book 1", "pen 1", "pen 2"]
    order = [(three.receptacles.index(r), kind(o), o) for o, r in three.where.items()]
    assert order == sorted(order)


def test_generate_orders_objects_by_place_kind_then_name() -> None:
    w = generate("kitchen", np.random.default_rng(3), receptacles=(1, 1), objects=(12, 12),
                 must_have=("mug",) + ("apple",) * 11, must_receptacles=("cabinet",))  # fmt: skip
    assert w.room == "kitchen" and w.receptacles == ("cabinet 1",)
    names = [f"apple {i}" for i in range(1, 12)]
    assert list(w.where) == sorted(names) + ["mug 1"]  # by name as text: "apple 10" before "apple 2"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_generate_guarantees(room: str) -> None:
    sizes_r, sizes_o = set(), set()
    for seed in range(40):
        w = generate(room, np.random.default_rng(seed), receptacles=(3, 5), objects=(2, 4))
        pool = {f"{k} {i}" for k, most in ROOMS[room] for i in range(1, most + 1)}
        assert set(w.receptacles) <= pool and len(set(w.receptacles)) == len(w.receptacles)
        assert list(w.receptacles) == sorted(w.receptacles, key=lambda r: (kind(r), int(r.split()[-1])))
        sizes_r.add(len(w.receptacles))
        sizes_o.add(len(w.where))
        numbers: dict[str, set[int]] = {}
        for o, r in w.where.items():
            numbers.setdefault(kind(o), set()).add(int(o.split()[-1]))
            assert kind(o) in OBJECTS[room] and r in w.receptacles and kind(r) not in APPLIANCES
        assert all(ns == set(range(1, len(ns) + 1)) for ns in numbers.values())  # numbered 1..count per kind
        order = [(w.receptacles.index(r), kind(o), o) for o, r in w.where.items()]
        assert order == sorted(order)
        assert (w.room, w.location, w.holding, w.opened, w.states) == (room, None, None, set(), {})
        assert all(not w.accessible(r) for r in w.receptacles if kind(r) in OPENABLE)
    assert sizes_o == {2, 3, 4}
    assert {3, 4, 5} <= sizes_r <= {3, 4, 5, 6}  # a sixth only when all five drawn were appliances


def test_generate_is_a_function_of_the_generator() -> None:
    a = generate("kitchen", np.random.default_rng(7), must_have=("egg",), must_receptacles=("toaster",))
    b = generate("kitchen", np.random.default_rng(7), must_have=("egg",), must_receptacles=("toaster",))
    assert a == b and "toaster 1" in a.receptacles and "egg 1" in a.where
    assert 6 <= len([r for r in a.receptacles if r != "toaster 1"]) + 1 <= 13 and 6 <= len(a.where) <= 12


# ------------------------------------------------------------------ task checks
def _task(ttype: str, obj: str, target: str) -> Task:
    return Task(ttype, obj, target, "", 0)  # type: ignore[arg-type]


def test_place_tasks_need_the_object_kind_the_target_kind_and_the_state() -> None:
    w = kitchen()
    place = _task("pick_and_place", "apple", "cabinet")
    assert not satisfied(w, place)
    w.where["apple 1"] = "cabinet 1"
    assert satisfied(w, place)
    assert not satisfied(w, _task("pick_and_place", "apple", "countertop"))
    assert not satisfied(w, _task("pick_and_place", "app", "cabinet"))  # a kind is a whole word
    for ttype, state in (("clean", "clean"), ("heat", "hot"), ("cool", "cold")):
        task = _task(ttype, "apple", "cabinet")
        w.states["apple 1"] = frozenset({"sliced"})
        assert not satisfied(w, task)
        w.states["apple 1"] = frozenset({state})
        assert satisfied(w, task)
    w.where["apple 1"] = None  # held, not placed
    assert not satisfied(w, _task("cool", "apple", "cabinet"))
    assert not satisfied(w, place)


def test_pick_two_needs_two_in_one_receptacle() -> None:
    w = World("kitchen", ("cabinet 1", "cabinet 2", "shelf 1"),
              {"cup 1": "cabinet 1", "cup 2": "cabinet 2", "cup 3": "shelf 1", "cupcake 1": "cabinet 1"})
    two = _task("pick_two", "cup", "cabinet")
    assert not satisfied(w, two)  # one in each cabinet; a cupcake is not a cup
    assert satisfied(w, _task("pick_and_place", "cup", "cabinet"))
    w.where["cup 3"] = "cabinet 2"
    assert satisfied(w, two)


def test_examine_needs_the_object_in_hand_at_a_lit_lamp() -> None:
    w = living()
    w.where["book 1"], w.holding = None, "book 1"
    task = _task("examine", "book", "desklamp")
    assert not satisfied(w, task)  # nowhere yet
    w.location = "sidetable 1"
    assert not satisfied(w, task)  # the lamp is off
    w.states["desklamp 1"] = frozenset({"lit"})
    assert satisfied(w, task)
    assert not satisfied(w, _task("examine", "pen", "desklamp"))
    w.location = "sofa 1"
    assert not satisfied(w, task)  # lit, but elsewhere
    w.location, w.holding = "sidetable 1", None
    assert not satisfied(w, task)


def test_world_ids_split_by_parity() -> None:
    train = [draw_world_id(np.random.default_rng(s), "train") for s in range(20)]
    evals = [draw_world_id(np.random.default_rng(s), "eval") for s in range(20)]
    assert all(i % 2 == 0 for i in train) and all(i % 2 == 1 for i in evals)
    assert [e - t for e, t in zip(evals, train, strict=True)] == [1] * 20
    assert train[3] == 2 * int(np.random.default_rng(3).integers(2**40))
    assert max(train) > 2**39 and len(set(train)) == 20
