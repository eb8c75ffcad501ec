"""Issue 54, the validators' static check (``loader.validator_problems``): routes past it, each run for real.

Each route is a validators.py whose ``check`` reaches what the check means to keep out (an
attribute named in a string, ``eval`` of bytes or of a code object passed through
``marshal``), using only allowed imports and no name, attribute or string the older check
refused. The sandbox does not run the static check, so each route runs there (the test
shows it is real); the static check must refuse each. The check stays advisory: the
sandbox and the split judge hold without it (test_skill_sp_sandbox_judge.py).
"""

from __future__ import annotations

import pytest

from arena.games.skill_sp.loader import validator_problems
from arena.games.skill_sp.sandbox import Sandbox
from test_skill_sp_sandbox import start_sandbox
from test_skill_sp_sandbox_issue38 import LIMITS, hang_guard  # noqa: F401 - autouse fixture


def hex_of(text: str) -> str:
    return text.encode().hex()


CHECKS = "\n\ndef validate(contract):\n    return []\n\n\ndef check(contract, response):\n    return reach()\n"
ROUTES = {
    # every public name of operator, attrgetter among them, under a name no check looks at
    "operator_star": ("""
from operator import *
U = "_" * 2


def reach():
    return attrgetter(U + "class" + U + "." + U + "name" + U)(())
""", "tuple"),
    # typing's names, get_type_hints among them: it evaluates the annotation "eval" into eval, which runs bytes
    "typing_star_get_type_hints": (f"""
from typing import *


def annotated(x: "eval"):
    return x


def reach():
    ev = get_type_hints(annotated)["x"]
    return ev(bytes.fromhex("{hex_of('6 * 7')}"))
""", 42),
    # functools.singledispatch's register evaluates annotations too: any code in the string runs; here it hands
    # out eval, which compiles a code object and runs it back through marshal
    "singledispatch_marshal": (f"""
import functools
sink = []


@functools.singledispatch
def dispatch(x):
    return x


def annotated(x: "sink.append(eval) or int"):
    return x


def reach():
    dispatch.register(annotated)
    ev = sink[0]
    marshal = ev(bytes.fromhex("{hex_of("__import__('marshal')")}"))
    code = ev(bytes.fromhex("{hex_of("compile('6 * 7', 'c', 'eval')")}"))
    return ev(marshal.loads(marshal.dumps(code)))
""", 42),
    # functools.update_wrapper copies attributes named in strings; a __setattr__ catches them: any attribute
    "update_wrapper": ("""
import functools
U = "_" * 2
caught = {}


class Catch:
    def __setattr__(self, name, value):
        caught[name] = value


def reach():
    functools.update_wrapper(Catch(), reach, assigned=[U + "globals" + U], updated=[])
    return "caught" in caught[U + "globals" + U]
""", True),
}


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return start_sandbox(LIMITS)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_route_is_real(sandbox, route):
    source, reached = ROUTES[route]
    r = sandbox.call("validators", "check", {"contract": {}, "response": 0}, {"validators.py": source + CHECKS})
    assert r.ok and r.value == reached, r


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_the_static_check_refuses_each_route(route):
    assert validator_problems(ROUTES[route][0] + CHECKS), route


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations\n\n\ndef typed(x: int, y: list[dict[str, int]]) -> tuple[int, ...]:\n"
        "    z: dict = {}\n    return (x,)\n",
        "import functools\n\n\n@functools.singledispatch\ndef f(x):\n    return 0\n\n\n@f.register(int)\ndef _(x):\n"
        "    return 1\n",
        "from typing import Any, Optional\n\n\ndef f(x: Optional[Any] = None) -> Any:\n    return x\n",
    ],
)
def test_the_static_check_still_accepts_ordinary_annotations_and_dispatch(source):
    assert validator_problems(source + CHECKS.replace("reach()", "True")) == []
