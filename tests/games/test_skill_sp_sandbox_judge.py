"""Issue 38, the judge's findings, each tried for real against the real bubblewrap and shown to fail:

4. a validator cannot write the judge's verdict;
5. deep arguments and deep SKILL.md contracts end as typed failures.

Findings 1-3 (runs that outlive the sandbox, host-wide budgets, the /tmp inode cap) are in
test_skill_sp_sandbox_issue38.py, whose limits and hang guard (an alarm: a hang fails the test
instead of stalling the suite) this module shares.
"""

from __future__ import annotations

import json
import os

import pytest

from arena.games.skill_sp.sandbox import Status
from test_skill_sp_sandbox_issue38 import LIMITS, hang_guard, sandbox  # noqa: F401 - fixtures

# ---------------------------------------------------------------- finding 4: a validator forging the judge's verdict
# Each route reaches the interpreter's frames, finds the driver's secret, result descriptor and job, writes
# the report it wants (every probe right, every answer the contract's) and ends the process before the
# real report. ``forge`` adapts to the job it finds itself in.
FORGE = """
import json


def forge():
    for names, module in frames():
        if "secret" in names and "fd" in names and "job" in names:
            job = names["job"]
            kwargs = job["kwargs"]
            n = len(kwargs.get("responses", [None]))
            value = [{"correct": True, "answer": kwargs["contract"]["answer"]}] * n
            if job["function"] == "checks":
                value = [True] * n
            elif job["function"] == "evaluate":
                value = value[0]
            text = names["secret"] + b"\\n" + json.dumps({"ok": True, "value": value}).encode()
            module["_write"](names["fd"], text)
            module["_exit"](0)


def validate(contract):
    return []


def check(contract, response):
    forge()
    return False
"""
ROUTES = {
    "match_class_pattern": """
def frames():
    try:
        raise ValueError
    except ValueError as exc:
        err = exc
    match err:
        case BaseException(__traceback__=tb):
            pass
    traceback_type = type(tb)
    match tb:
        case traceback_type(tb_frame=frame):
            pass
    frame_type = type(frame)
    while frame is not None:
        match frame:
            case frame_type(f_locals=names, f_globals=module, f_back=back):
                pass
        yield names, module
        frame = back
""",
    "formatter_get_field": """
import string
U = "_" * 2


def attr(obj, name):
    return string.Formatter().get_field("0." + name, (obj,), {})[0]


def frames():
    try:
        raise ValueError
    except ValueError as exc:
        err = exc
    frame = attr(attr(err, U + "traceback" + U), "tb_frame")
    while frame is not None:
        yield attr(frame, "f_locals"), attr(frame, "f_globals")
        frame = attr(frame, "f_back")
""",
    "re_enum_bltns_eval": """
import re
U = "_" * 2
ev = re.enum.bltns.eval  # builtins.eval, two modules down: every attribute below is a string to eval
getframe = ev(U + "import" + U + "('sys')._getframe")


def frames():
    frame = getframe(0)
    while frame is not None:
        yield ev("f.f_locals", {"f": frame}), ev("f.f_globals", {"f": frame})
        frame = ev("f.f_back", {"f": frame})
""",
    "json_codecs_chain": """
import json
job_text = json.codecs.open("/box/_job.json").read()  # codecs.open, the builtin open's twin: files
ev = json.decoder.re.enum.bltns.eval  # and eval, four modules down
U = "_" * 2
getframe = ev(U + "import" + U + "('sys')._getframe")


def frames():
    frame = getframe(0)
    while frame is not None:
        yield ev("f.f_locals", {"f": frame}), ev("f.f_globals", {"f": frame})
        frame = ev("f.f_back", {"f": frame})
""",
}


def utf7_hidden(hidden: str) -> str:
    """A validator whose UTF-8 reading is honest and whose UTF-7 reading (the cookie: what Python runs) is ``hidden``:
    the hidden lines sit in one comment, joined by UTF-7 newlines (``+AAo-``)."""
    honest = "import json\n\n\ndef validate(contract):\n    return []\n\n\ndef check(contract, response):\n    return False\n"
    comment = "#+AAo-" + "+AAo-".join(line.replace("+", "+-") for line in hidden.splitlines())
    source = "# -*- coding: utf-7 -*-\n" + honest + comment + "\n"
    assert source.encode().decode("utf-7").endswith(hidden.rstrip("\n") + "\n")  # the cookie's reading is the attack
    return source


FORGERS = {name: frames + FORGE for name, frames in ROUTES.items()}
FORGERS["utf7_cookie"] = utf7_hidden(ROUTES["match_class_pattern"] + FORGE)
TOOL_CONTRACT = {"answer": 41, "calls": [{"tool": "calculate", "args": {"expression": "6 * 7"}}]}  # the calls give 42
PROBE = {"tool": "calculate", "args": {"expression": "6 * 7"}}


@pytest.mark.parametrize("route", sorted(FORGERS))
def test_the_static_check_refuses_each_route(route):
    from arena.games.skill_sp.loader import validator_problems

    assert validator_problems(FORGERS[route]), route


@pytest.mark.parametrize("route", sorted(FORGERS))
def test_a_forging_validator_cannot_write_the_judges_verdict(sandbox, route):
    """The sandbox does not run the static check: the split judge is what holds, for every route."""
    from arena.games.skill_sp.loader import TOOLS_SOURCE
    from arena.games.skill_sp.sandbox import JUDGE_SOURCE

    files = {"validators.py": FORGERS[route], "tools.py": TOOLS_SOURCE, "judge.py": JUDGE_SOURCE}
    forged = sandbox.call("validators", "check", {"contract": TOOL_CONTRACT, "response": PROBE}, files)
    assert forged.ok and forged.value == [{"correct": True, "answer": 41}], forged  # the route really takes the run over
    both = sandbox.call("judge", "evaluate_all", {"contract": TOOL_CONTRACT, "responses": [PROBE, PROBE]}, files)
    assert both.ok and both.value == [{"correct": True, "answer": 42}] * 2, both  # its own say; the trusted answers
    one = sandbox.call("judge", "evaluate", {"contract": TOOL_CONTRACT, "response": PROBE}, files)
    assert one.ok and one.value == {"correct": True, "answer": 42}, one


@pytest.mark.parametrize("route", sorted(FORGERS))
def test_a_forging_validator_does_not_change_the_reward(monkeypatch, route):
    """Through the game: the probes' tool calls give 42, the contract says 41; forged, the proposer would get 1."""
    import arena.games.skill_sp.env as env_module
    from arena.games.skill_sp import SkillSpGame

    monkeypatch.setattr(env_module, "EXPLORATION_VALIDATORS", FORGERS[route])
    env = SkillSpGame(probes=4, solvers=2, sandbox=LIMITS)
    env.reset(seed=0, options={"stream": "exploration"})
    texts = {"proposer": json.dumps({"task": "What is 6 * 7?", "contract": TOOL_CONTRACT}), "probe": json.dumps(PROBE),
             "solver": json.dumps(PROBE)}  # fmt: skip
    while not env.done:
        seat = env.agent_selection
        env.step(texts[env.role(seat)])
    ep = env.episode()
    assert ep.info["verified"] and not ep.info["consistent"], ep.info
    assert ep.rewards["proposer"] == 0.0, ep.rewards


# ---------------------------------------------------------------- finding 5: deep arguments, deep SKILL.md
def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_deep_call_arguments_are_an_error_without_leaking_descriptors(sandbox):
    deep: object = 0
    for _ in range(1500):
        deep = [deep]
    cyclic: list = []
    cyclic.append(cyclic)
    files = {"m.py": "def f(x):\n    return 1\n"}
    before = open_descriptors()
    for value in (deep, cyclic, deep, cyclic):
        r = sandbox.call("m", "f", {"x": value}, files)
        assert r.status is Status.ERROR and "nested deeper" in r.reason, r
        judged = sandbox.call("judge", "evaluate_all", {"contract": {"answer": 1}, "responses": [value]}, files)
        assert judged.status is Status.ERROR, judged
    assert open_descriptors() == before
    fine = sandbox.call("m", "f", {"x": [[[[1]]]]}, files)
    assert fine.ok and fine.value == 1, fine


def test_deep_skill_md_is_invalid_not_an_exception():
    from arena.core.game_types import Invalid
    from arena.games.skill_sp.loader import load_library, parse_skill

    pkg = next(iter(load_library().values()))
    text = pkg.skill_md()
    deep_contract = text.replace("```json\n", "```json\n" + '{"a": ' * 3000 + "1" + "}" * 3000 + "\n```\n\n### Example 0\nTask: t\n\n```json\n", 1)
    deep_front = text.replace("---\n", "---\ndeep: " + "[" * 3000 + "]" * 3000 + "\n", 1)
    for bad in (deep_contract, deep_front):
        assert isinstance(parse_skill(bad, pkg.validators), Invalid)
    assert "nested deeper" in parse_skill(deep_contract, pkg.validators).reason
    assert parse_skill(text, pkg.validators) == pkg  # the honest package still parses


def test_the_split_judge_keeps_the_judges_results(sandbox):
    """Honest validators get what the one-process judge gave: logic answers are the responses themselves,
    and a check that raises makes only its response wrong, in evaluate_all and in evaluate alike, with
    its trusted answer kept (issue 54: an error no longer turns the answer into an abstention)."""
    from arena.games.skill_sp.env import EXPLORATION_VALIDATORS
    from arena.games.skill_sp.loader import TOOLS_SOURCE
    from arena.games.skill_sp.sandbox import JUDGE_SOURCE

    files = {"validators.py": EXPLORATION_VALIDATORS, "tools.py": TOOLS_SOURCE, "judge.py": JUDGE_SOURCE}
    logic = sandbox.call("judge", "evaluate_all", {"contract": {"answer": [1, 2]}, "responses": [[1, 2], [2, 1]]}, files)
    assert logic.ok and logic.value == [{"correct": True, "answer": [1, 2]}, {"correct": False, "answer": [2, 1]}]
    tool = sandbox.call("judge", "evaluate", {"contract": TOOL_CONTRACT | {"answer": 42}, "response": PROBE}, files)
    assert tool.ok and tool.value == {"correct": True, "answer": 42}, tool
    picky = "def validate(contract):\n    return []\ndef check(contract, response):\n    return 1 / response > 0\n"
    files["validators.py"] = picky
    some = sandbox.call("judge", "evaluate_all", {"contract": {"answer": 1}, "responses": [1, 0]}, files)
    assert some.ok and some.value[0] == {"correct": True, "answer": 1}, some
    assert some.value[1]["correct"] is False and "ZeroDivisionError" in some.value[1]["error"], some
    assert some.value[1]["answer"] == 0, some
    one = sandbox.call("judge", "evaluate", {"contract": {"answer": 1}, "response": 0}, files)
    assert one.ok and one.value["correct"] is False and one.value["answer"] == 0, one
    assert "ZeroDivisionError" in one.value["error"], one
    assert sandbox.call("judge", "evaluate", {"contract": {}}, files).status is Status.ERROR


# ---------------------------------------------------------------- issue 54, escape 2: the validator choosing answers
# The contract says 42; the probes answer 41, 41, 41, 42. An honest judge finds the majority (41) against the
# contract: the task is invalid and the proposer earns 0. Each validator below fails on the 41s only; before
# the fix those answers became abstentions, 42 became the majority and the proposer earned 0.5.
PICKY = {
    "raises": "raise ValueError('I dislike this answer')",
    "spins": "while True:\n            pass",
    "exits": "raise SystemExit(0)",
    "exits_the_process": "import os\n        os._exit(0)",
}


@pytest.mark.parametrize("how", sorted(PICKY))
def test_a_validator_that_fails_on_some_answers_does_not_remove_them_from_the_majority(monkeypatch, how):
    import arena.games.skill_sp.env as env_module
    from arena.games.skill_sp import SkillSpGame

    validators = ("def validate(contract):\n    return []\n\n\ndef check(contract, response):\n"
                  f"    if response == 41:\n        {PICKY[how]}\n    return response == contract['answer']\n")  # fmt: skip
    monkeypatch.setattr(env_module, "EXPLORATION_VALIDATORS", validators)
    env = SkillSpGame(probes=4, solvers=2, sandbox=LIMITS)
    env.reset(seed=0, options={"stream": "exploration"})
    texts = {"proposer": json.dumps({"task": "What is 6 * 7?", "contract": {"answer": 42}}),
             "probe_0": "41", "probe_1": "41", "probe_2": "41", "probe_3": "42"}  # fmt: skip
    while not env.done:
        seat = env.agent_selection
        env.step(texts.get(seat, "42"))
    ep = env.episode()
    assert ep.rewards["proposer"] == 0.0 and ep.info["verified"] and not ep.info["consistent"], (ep.rewards, ep.info)
