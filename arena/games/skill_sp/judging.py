"""The parent's side of the split judge (judge.py runs inside the sandbox; this module never runs there).

``Sandbox.call`` of ``judge.evaluate_all(contract, responses)`` or
``judge.evaluate(contract, response)``, with the package's own ``judge.py``, comes
here and is two runs, combined by the parent:

* the **answers**, which the probe majority counts: for a tool-use contract, what the
  response's tool calls return, computed by trusted code (judge.py, tools.py) in a run
  that holds no model-written code; otherwise the response itself (no run needed);
* the **checks**, in a run with the model-written ``validators.py``: one boolean (or an
  error) per response, shape-checked here.

The answers never depend on the validators' run. A check that raises, a validators' run
that spins into its time limit, exits (``SystemExit``, ``os._exit``) or reports
something else than one boolean per response makes those responses *wrong* (with
``error``), and their trusted answers still count in the majority: a validator decides
correctness, which ``check`` decides anyway, never which answers are counted. (It used
to: answers of responses whose check failed were dropped as abstentions, so a validator
that raised for the 41s among probes answering 41, 41, 41, 42 made 42 the majority.)

The result is an error only when the trusted answers cannot be had (bad arguments, or
the answers' run itself failed on a response's tool calls).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from arena.games.skill_sp import judge
from arena.games.skill_sp.limits import Limits, SandboxResult, Status

JUDGE_SOURCE = Path(__file__).with_name("judge.py").read_text()
ENTRIES = ("evaluate_all", "evaluate")
Execute = Callable[[dict[str, Any], Mapping[str, str], Limits], SandboxResult]


def is_judge_call(module: str, function: str, files: Mapping[str, str]) -> bool:
    """Whether a ``Sandbox.call`` is the package's own judge, which runs split."""
    return module == "judge" and function in ENTRIES and files.get("judge.py") == JUDGE_SOURCE


def split_judge(execute: Execute, function: str, kwargs: Mapping[str, Any], files: Mapping[str, str],
                lim: Limits) -> SandboxResult:  # fmt: skip
    """``judge.evaluate_all`` (or ``evaluate``) as two runs of ``execute``: answers without the validators,
    checks with them; the value is one verdict per response (one verdict for ``evaluate``)."""
    single = function == "evaluate"
    if set(kwargs) != {"contract", "response" if single else "responses"}:
        return SandboxResult(Status.ERROR, reason=f"judge.{function}: arguments are contract and response(s)")
    responses = [kwargs["response"]] if single else kwargs["responses"]
    if not isinstance(responses, list):
        return SandboxResult(Status.ERROR, reason="judge.evaluate_all: responses must be a list")
    halves = {"contract": kwargs["contract"], "responses": responses}
    wall = cpu = 0.0
    answers = list(responses)
    if judge.uses_tools(halves["contract"]):  # trusted code, in a run that holds no model-written code
        trusted = {name: files[name] for name in ("judge.py", "tools.py") if name in files}
        answered = execute({"mode": "call", "module": "judge", "function": "answers", "kwargs": halves}, trusted, lim)
        if not (answered.ok and isinstance(answered.value, list) and len(answered.value) == len(responses)):
            return answered if not answered.ok else dataclasses.replace(answered, status=Status.ERROR, value=None)
        wall, cpu, answers = answered.wall_s, answered.cpu_s, answered.value
    checked = execute({"mode": "call", "module": "judge", "function": "checks", "kwargs": halves}, files, lim)
    if checked.ok and judge.validate_checks(checked.value, len(responses)):
        checks = checked.value
    else:  # the validators' run failed as a whole: every response is wrong, no answer is dropped
        why = checked.reason if not checked.ok else "its checks are not one boolean (or error) per response"
        checks = [{"error": f"the validators' run failed ({checked.status}: {why})"[:300]}] * len(responses)
    verdicts = judge.combine(checks, answers)
    return dataclasses.replace(checked, status=Status.OK, limit=None, reason="", value=verdicts[0] if single else verdicts,
                               wall_s=wall + checked.wall_s, cpu_s=cpu + checked.cpu_s)  # fmt: skip
