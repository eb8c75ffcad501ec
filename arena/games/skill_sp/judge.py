"""Judging responses in two halves, so that no process that imported model-written code writes the verdict.

A verdict per response is ``{"correct": bool, "answer": value}``: whether the validators'
exact checker accepts the response, and the answer it amounts to (for a tool-use
contract, the value its tool calls return; otherwise the response itself; ``None``
only when the calls fail), which the probe majority counts. A check that fails adds
``"error"`` and makes the response wrong; its answer stays what trusted code computed.

The model-written ``validators.py`` can take over the interpreter it runs in (frames,
``gc``, match-statement class patterns read any attribute: the static check in
``loader`` is a first filter only), and with it that run's report. So the judge is
never one run. :meth:`~arena.games.skill_sp.sandbox.Sandbox.call` of
``judge.evaluate_all(contract, responses)`` or ``judge.evaluate(contract, response)``
(with this file as ``judge.py``) runs

* :func:`checks` in one sandbox process, with ``validators.py``: the only thing read
  from it is one boolean (or an error) per response, which is the validators' own say
  anyway (``check`` decides correctness, and may keep state across responses);
* :func:`answers` in a second sandbox process, without ``validators.py`` (only this
  file and ``tools.py``): the trusted answers, out of the validators' reach;

and the parent (``judging.py``) combines them with :func:`combine`. ``evaluate_all``
judges a phase's responses in one pair of runs; an exception in one response's check
makes only that response wrong (with ``error``), and a validators' run that fails as a
whole makes every response wrong: no failure of the validators removes an answer from
the majority.

Standard library only, and no import at module level: the parent imports this module
for :func:`combine` and :func:`validate_checks`; the sandbox imports it as ``judge``.
"""


def checks(contract, responses):
    """Inside the sandbox, with the validators: ``True``/``False`` per response, or ``{"error": message}``."""
    import validators  # model-written: this process's report is the validators' to shape

    out = []
    for response in responses:
        try:
            out.append(bool(validators.check(contract, response)))
        except BaseException as exc:  # noqa: BLE001 - a validator may fail on any response (SystemExit too)
            out.append({"error": f"{type(exc).__name__}: {exc}"[:200]})
    return out


def answers(contract, responses):
    """Inside the sandbox, without the validators: the answer each response amounts to."""
    if not uses_tools(contract):
        return list(responses)
    import tools  # trusted: the package's own tools.py, in a run that holds no model-written code

    return [tools.run_calls(response).get("value") for response in responses]


def uses_tools(contract):
    """Whether answers come from running the response's tool calls (a tool-use contract)."""
    return isinstance(contract, dict) and "calls" in contract


def validate_checks(value, count):
    """Whether ``value`` is what :func:`checks` returns for ``count`` responses (the validators' run may forge it)."""
    return isinstance(value, list) and len(value) == count and all(
        v is True or v is False or (isinstance(v, dict) and set(v) == {"error"} and isinstance(v["error"], str))
        for v in value
    )


def combine(verdicts, answered):
    """The verdicts: the validators' checks (from :func:`checks`) with the trusted answers (from :func:`answers`).

    A failed check makes its response wrong and keeps its trusted answer: the validators never choose
    which answers the probe majority counts."""
    out = []
    for correct, answer in zip(verdicts, answered, strict=True):
        if isinstance(correct, dict):
            out.append({"correct": False, "answer": answer, "error": correct["error"]})
        else:
            out.append({"correct": correct, "answer": answer})
    return out
