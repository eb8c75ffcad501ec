"""Runs inside the sandbox (standard library + ``tools`` + the task's ``validators``): judge responses.

``evaluate(contract, response)`` returns ``{"correct": bool, "answer": value}``: whether the
validators' exact checker accepts the response, and the answer it amounts to (for a
tool-use contract, the value its tool calls return; otherwise the response itself;
``None`` when the calls fail), which the probe majority counts. ``evaluate_all`` judges
a phase's responses in one run (one process start instead of K); an exception in one
response's check makes only that response wrong.
"""

import importlib.util
import os


def _private_tools():
    """A copy of ``tools`` of judge's own, loaded before the model-written validators, which share this
    interpreter: they may rebind what ``import tools`` gives them, not this copy (not in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location("_judge_tools", os.path.join(os.path.dirname(__file__), "tools.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_run_calls = _private_tools().run_calls
del _private_tools

import validators  # noqa: E402 - deliberately after the private copy above


def evaluate(contract, response):
    correct = bool(validators.check(contract, response))
    if isinstance(contract, dict) and "calls" in contract:
        answer = _run_calls(response).get("value")
    else:
        answer = response
    return {"correct": correct, "answer": answer}


def evaluate_all(contract, responses):
    out = []
    for response in responses:
        try:
            out.append(evaluate(contract, response))
        except Exception as exc:  # noqa: BLE001 - a validator may fail on any response
            out.append({"correct": False, "answer": None, "error": f"{type(exc).__name__}: {exc}"[:200]})
    return out
