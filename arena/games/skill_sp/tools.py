"""The tools of Skill-SP's tool-use skills, and the JSON tool-call format that runs them.

Standard library only: this file is copied into every sandbox run (as ``tools.py``)
that executes a solver's calls or a skill's validators, and nothing here may import
the framework.

**Tool-call format.** A response is one call or a JSON list of calls, run in order::

    {"tool": "convert_units", "args": {"value": 3, "from_unit": "km", "to_unit": "mi"}}
    [{"tool": "calculate", "args": {"expression": "12 * 7"}},
     {"tool": "convert_units", "args": {"value": "$0", "from_unit": "h", "to_unit": "min"}}]

An argument that is exactly the string ``"$k"`` stands for the result of call ``k``
(earlier in the list). The response's value is the result of its last call.
Every tool is a pure function of JSON values to a JSON value that raises
``ToolError`` (or ``ValueError``/``KeyError``/...) on bad input; ``run_calls``
turns any such failure into ``{"error": ...}`` so model input never crashes it.
Numbers are compared with :func:`same_value`: exact for ints, strings, lists and
objects, relative tolerance ``1e-6`` (or the contract's ``tolerance``) for floats.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import operator
import re
import statistics

MAX_CALLS = 8


class ToolError(ValueError):
    """A tool refused its arguments."""


# ------------------------------------------------------------------ arithmetic
_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
_FUNCS = {"abs": abs, "round": round, "min": min, "max": max, "sqrt": math.sqrt, "floor": math.floor, "ceil": math.ceil}


def calculate(expression: str) -> float | int:
    """Evaluate an arithmetic expression: numbers, + - * / // % **, parentheses, abs round min max sqrt floor ceil."""
    if not isinstance(expression, str) or len(expression) > 200:
        raise ToolError("expression must be a string of at most 200 characters")

    def ev(node: ast.AST) -> float | int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ToolError("exponent too large")
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ToolError(f"unsupported syntax: {type(node).__name__}")

    try:
        return _number(ev(ast.parse(expression, mode="eval")))
    except (SyntaxError, ZeroDivisionError, OverflowError, TypeError) as exc:
        raise ToolError(f"cannot evaluate: {exc}") from None


def _number(x: float | int) -> float | int:
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ToolError("result is not finite")
        return int(x) if x.is_integer() and abs(x) < 2**53 else round(x, 10)
    return x


# ------------------------------------------------------------------ units
_UNITS = {  # unit -> (dimension, factor to the SI base unit)
    "mm": ("length", 1e-3), "cm": ("length", 1e-2), "m": ("length", 1.0), "km": ("length", 1e3),
    "in": ("length", 0.0254), "ft": ("length", 0.3048), "yd": ("length", 0.9144), "mi": ("length", 1609.344),
    "mg": ("mass", 1e-6), "g": ("mass", 1e-3), "kg": ("mass", 1.0), "t": ("mass", 1e3),
    "oz": ("mass", 0.028349523125), "lb": ("mass", 0.45359237),
    "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0), "day": ("time", 86400.0),
    "week": ("time", 604800.0),
    "ml": ("volume", 1e-6), "l": ("volume", 1e-3), "m3": ("volume", 1.0), "gal": ("volume", 0.003785411784),
    "C": ("temperature", None), "F": ("temperature", None), "K": ("temperature", None),
}  # fmt: skip


def convert_units(value: float, from_unit: str, to_unit: str) -> float | int:
    """Convert ``value`` between units of one dimension (length, mass, time, volume, temperature)."""
    if from_unit not in _UNITS or to_unit not in _UNITS:
        raise ToolError(f"unknown unit; known: {', '.join(_UNITS)}")
    (dim_a, fa), (dim_b, fb) = _UNITS[from_unit], _UNITS[to_unit]
    if dim_a != dim_b:
        raise ToolError(f"cannot convert {dim_a} to {dim_b}")
    value = _as_number(value)
    if dim_a == "temperature":
        kelvin = {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[from_unit]
        out = {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[to_unit]
    else:
        out = value * fa / fb
    return _number(round(out, 6))


def _as_number(x: object) -> float | int:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ToolError(f"expected a number, got {type(x).__name__}")
    return x


# ------------------------------------------------------------------ dates
def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        raise ToolError(f"expected an ISO date YYYY-MM-DD, got {text!r}") from None


def date_add(date: str, days: int) -> str:
    """The ISO date ``days`` days after ``date`` (negative: before)."""
    if not isinstance(days, int) or isinstance(days, bool) or abs(days) > 100_000:
        raise ToolError("days must be an integer of at most 100000 in size")
    try:
        return (_date(date) + dt.timedelta(days=days)).isoformat()
    except OverflowError:
        raise ToolError("date out of range") from None


def date_diff(start: str, end: str) -> int:
    """Days from ``start`` to ``end`` (negative if ``end`` is earlier)."""
    return (_date(end) - _date(start)).days


def weekday(date: str) -> str:
    """The English name of the date's day of the week."""
    return ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"][_date(date).weekday()]


# ------------------------------------------------------------------ strings and lists
_TEXT_OPS = {
    "upper": str.upper, "lower": str.lower, "reverse": lambda s: s[::-1], "length": len,
    "words": lambda s: len(s.split()), "title": str.title,
    "vowels": lambda s: sum(c in "aeiouAEIOU" for c in s), "strip": str.strip,
}  # fmt: skip


def text_transform(text: str, op: str) -> str | int:
    """Apply one of upper, lower, reverse, length, words, title, vowels, strip to ``text``."""
    if not isinstance(text, str) or len(text) > 10_000 or op not in _TEXT_OPS:
        raise ToolError(f"text must be a string; op one of {', '.join(_TEXT_OPS)}")
    return _TEXT_OPS[op](text)


def count_substring(text: str, sub: str) -> int:
    """Non-overlapping occurrences of ``sub`` in ``text``."""
    if not isinstance(text, str) or not isinstance(sub, str) or not sub:
        raise ToolError("text and a non-empty sub must be strings")
    return text.count(sub)


def replace_text(text: str, old: str, new: str) -> str:
    """``text`` with every ``old`` replaced by ``new``."""
    if not all(isinstance(x, str) for x in (text, old, new)) or not old or len(text) > 10_000:
        raise ToolError("text, a non-empty old and new must be strings")
    return text.replace(old, new)[:20_000]


def regex_findall(pattern: str, text: str) -> list[str]:
    """All matches of a Python regular expression (whole matches only)."""
    if not isinstance(pattern, str) or not isinstance(text, str) or len(pattern) > 200:
        raise ToolError("pattern and text must be strings")
    try:
        return [m.group(0) for m in re.finditer(pattern, text)][:1000]
    except re.error as exc:
        raise ToolError(f"bad pattern: {exc}") from None


_LIST_OPS = {
    "sort": sorted, "reverse": lambda xs: xs[::-1], "unique": lambda xs: list(dict.fromkeys(xs)),
    "sum": sum, "min": min, "max": max, "length": len, "first": lambda xs: xs[0], "last": lambda xs: xs[-1],
}  # fmt: skip


def list_op(items: list, op: str) -> object:
    """Apply one of sort, reverse, unique, sum, min, max, length, first, last to a list of numbers or strings."""
    if not isinstance(items, list) or len(items) > 10_000 or op not in _LIST_OPS:
        raise ToolError(f"items must be a list; op one of {', '.join(_LIST_OPS)}")
    if any(isinstance(x, (list, dict)) for x in items):
        raise ToolError("items must be numbers or strings")
    try:
        return _LIST_OPS[op](items)
    except (TypeError, IndexError, ValueError) as exc:
        raise ToolError(f"{op} failed: {exc}") from None


def describe(numbers: list, stat: str) -> float | int:
    """One statistic of a list of numbers: mean, median, mode, stdev (sample), pvariance, range."""
    if not isinstance(numbers, list) or not numbers or not all(isinstance(x, (int, float)) for x in numbers):
        raise ToolError("numbers must be a non-empty list of numbers")
    funcs = {"mean": statistics.mean, "median": statistics.median, "mode": statistics.mode,
             "stdev": statistics.stdev, "pvariance": statistics.pvariance, "range": lambda xs: max(xs) - min(xs)}  # fmt: skip
    if stat not in funcs:
        raise ToolError(f"stat one of {', '.join(funcs)}")
    try:
        return _number(round(float(funcs[stat](numbers)), 6))
    except statistics.StatisticsError as exc:
        raise ToolError(str(exc)) from None


def json_get(document: str, path: str) -> object:
    """Follow a dotted path (object keys, list indices) through a JSON document given as text."""
    try:
        node = json.loads(document)
    except (TypeError, ValueError):
        raise ToolError("document must be JSON text") from None
    if not isinstance(path, str):
        raise ToolError("path must be a string like 'a.b.0'")
    for key in path.split(".") if path else []:
        try:
            node = node[int(key)] if isinstance(node, list) else node[key]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ToolError(f"no {key!r} at this point of the path") from None
    return node


def convert_base(number: str, from_base: int, to_base: int) -> str:
    """Write the integer ``number`` (digits 0-9a-z in ``from_base``) in ``to_base``; bases 2..36."""
    if not all(isinstance(b, int) and 2 <= b <= 36 for b in (from_base, to_base)) or not isinstance(number, str):
        raise ToolError("number must be a string and bases integers in 2..36")
    try:
        n = int(number, from_base)
    except ValueError:
        raise ToolError(f"{number!r} is not a base-{from_base} integer") from None
    sign, n, digits = "-" if n < 0 else "", abs(n), ""
    while True:
        n, d = divmod(n, to_base)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
        if n == 0:
            return sign + digits


TOOLS = {
    f.__name__: f
    for f in (calculate, convert_units, date_add, date_diff, weekday, text_transform, count_substring,
              replace_text, regex_findall, list_op, describe, json_get, convert_base)
}  # fmt: skip


# ------------------------------------------------------------------ running calls
def parse_calls(response: object) -> list[dict] | str:
    """A response (JSON text, one call or a list of calls) as a list of ``{"tool", "args"}``; else a reason."""
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return "response is not JSON"
    calls = response if isinstance(response, list) else [response]
    if not calls or len(calls) > MAX_CALLS:
        return f"a response has 1 to {MAX_CALLS} calls"
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or set(call) != {"tool", "args"} or not isinstance(call["args"], dict):
            return f'call {i} is not {{"tool": name, "args": {{...}}}}'
        if call["tool"] not in TOOLS:
            return f"call {i}: unknown tool {call['tool']!r}"
    return calls


def run_calls(response: object) -> dict:
    """Run a response's calls in order: ``{"value": last result, "results": [...]}`` or ``{"error": reason}``."""
    calls = parse_calls(response)
    if isinstance(calls, str):
        return {"error": calls}
    results: list = []
    for i, call in enumerate(calls):
        args = {}
        for key, arg in call["args"].items():
            if isinstance(arg, str) and re.fullmatch(r"\$\d+", arg):
                k = int(arg[1:])
                if k >= i:
                    return {"error": f"call {i} refers to {arg}, which has not run"}
                arg = results[k]
            args[key] = arg
        try:
            results.append(TOOLS[call["tool"]](**args))
        except (ToolError, TypeError, ValueError, KeyError, IndexError, ArithmeticError, RecursionError) as exc:
            return {"error": f"call {i} ({call['tool']}): {exc}"[:300]}
    return {"value": results[-1], "results": results}


def same_value(a: object, b: object, tolerance: float = 1e-6) -> bool:
    """Equality of JSON values, floats within relative ``tolerance``; bools are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k], tolerance) for k in a)
    return a == b


# ------------------------------------------------------------------ shared contract checks
def validate_tool_contract(contract: object, allowed: set[str]) -> list[str]:
    """Problems with a tool-use contract ``{"answer", "calls", "tolerance"?}``: the reference calls must use
    only ``allowed`` tools and reproduce the answer when run."""
    if not isinstance(contract, dict) or "answer" not in contract or "calls" not in contract:
        return ['the contract must be an object with "answer" and "calls"']
    extra = set(contract) - {"answer", "calls", "tolerance"}
    if extra:
        return [f"unknown contract keys: {sorted(extra)}"]
    calls = parse_calls(contract["calls"])
    if isinstance(calls, str):
        return [f"reference calls: {calls}"]
    used = {c["tool"] for c in calls} - allowed
    if used:
        return [f"tools outside this skill: {sorted(used)}"]
    run = run_calls(calls)
    if "error" in run:
        return [f"reference calls fail: {run['error']}"]
    if not same_value(run["value"], contract["answer"], contract.get("tolerance", 1e-6)):
        return [f"reference calls give {run['value']!r}, not the answer {contract['answer']!r}"]
    return []


def check_tool_response(contract: dict, response: object) -> bool:
    """A solver's response is right iff its calls run and the last result equals the contract's answer."""
    run = run_calls(response)
    return "error" not in run and same_value(run["value"], contract["answer"], contract.get("tolerance", 1e-6))
