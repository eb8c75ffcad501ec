"""LSP's rules as pure functions: query extraction, verdict parsing, rewards, watch metrics.

Nothing here imports the env machinery; every function takes any string and
never raises on it.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence

from arena.core.game import Invalid

START, END = "[Start Generation]", "[End Generation]"


# ------------------------------------------------------------------ challenger
def extract_query(text: str, fmt: str = "strict", max_chars: int = 2000) -> str | Invalid:
    """The challenger's query.

    strict (paper): the stripped text between the first ``[Start Generation]`` and
    the next ``[End Generation]``. lenient (small models): that, else the text after
    a lone ``[Start Generation]``, else the first non-empty line. Empty -> Invalid.
    The result is cut to ``max_chars``.
    """
    start = text.find(START)
    query: str | None = None
    if start >= 0:
        rest = text[start + len(START):]
        end = rest.find(END)
        if end >= 0:
            query = rest[:end]
        elif fmt == "lenient":
            query = rest
    elif fmt == "lenient":
        query = next((line for line in text.replace(END, "\n").splitlines() if line.strip()), "")
    if query is None:
        return Invalid(reason=f"no query between {START} and {END}")
    query = query.strip()[:max_chars].strip()
    return query if query else Invalid(reason="the query is empty")


# ------------------------------------------------------------------ referee
_SCORE = re.compile(r"<Score>\s*(\d{1,3})\s*(?:</Score>|$)", re.IGNORECASE)


def parse_score(text: str) -> int | None:
    """The judge's ``R_Q``: k of the LAST ``<Score>k</Score>`` when 0 <= k <= 7, else None.

    The closing tag may be missing at the very end of the text (it is the judge's
    stop string, which generation cuts off).
    """
    found = _SCORE.findall(text)
    if not found:
        return None
    k = int(found[-1])
    return k if 0 <= k <= 7 else None


def parse_reward(text: str) -> float | None:
    """A reward seat's score (``repr(float)`` from a reward-model policy); None if not a finite number."""
    try:
        value = float(text.strip())
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------ verifier
_EXPR = re.compile(r"\d[\d,]*+(?:\s*+[-+*×x]\s*+\d[\d,]*+)++")
_NUMBER = re.compile(r"-?\d[\d,]*+(?:\.\d+)?")
MAX_OPERANDS, MAX_DIGITS = 4, 6


def _eval(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
        left, right = _eval(node.left), _eval(node.right)
        return left + right if isinstance(node.op, ast.Add) else left - right if isinstance(node.op, ast.Sub) else left * right
    raise ValueError("not integer + - * arithmetic")


def arithmetic_target(query: str) -> int | Invalid:
    """The value of the first integer expression with + - * (× and x read as *) in the query.

    At most ``MAX_OPERANDS`` operands of at most ``MAX_DIGITS`` digits (commas in
    numbers ignored); usual precedence. No such expression -> Invalid.
    """
    for match in _EXPR.finditer(query):
        expr = match.group(0).replace(",", "").replace("×", "*").replace("x", "*")
        operands = re.findall(r"\d+", expr)
        if len(operands) > MAX_OPERANDS or any(len(o) > MAX_DIGITS for o in operands):
            continue
        try:
            return _eval(ast.parse(expr, mode="eval").body)
        except (SyntaxError, ValueError):
            continue
    return Invalid(reason=f"no checkable arithmetic (integers, + - *, at most {MAX_OPERANDS} operands) in the query")


_AFTER_EQUALS = re.compile(r"=\s*+(-?\d[\d,]*+(?:\.\d+)?)")


def final_number(answer: str, rule: str = "last") -> float | None:
    """The solver's final answer.

    ``last``: the content of the last ``\\boxed{}`` if it is a number, else the last number.
    ``after_equals``: the number right after the first ``=`` (as in "7 + 5 = 12"), else as ``last``;
    for answers cut off by the token budget, whose last number is often a restated operand.
    """
    if rule == "after_equals" and (hit := _AFTER_EQUALS.search(answer)):
        try:
            return float(hit.group(1).replace(",", ""))
        except ValueError:
            return None
    boxed = re.findall(r"\\boxed\{([^{}]*)\}", answer)
    for candidate in (boxed[-1] if boxed else "", answer):
        numbers = _NUMBER.findall(candidate)
        if numbers:
            try:
                return float(numbers[-1].replace(",", ""))
            except ValueError:
                return None
    return None


def arithmetic_reward(target: int, answer: str, rule: str = "last") -> float:
    """``R(q, a) = 1`` when the answer's final number (``final_number(answer, rule)``) equals the target, else 0."""
    got = final_number(answer, rule)
    return float(got is not None and got == target)


# ------------------------------------------------------------------ rewards
def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def solver_rewards(r: Sequence[float], r_q: Sequence[float] | None) -> list[float]:
    """Solver j: ``R_j`` (LSP-Zero) or ``R_j + R_Q_j`` (LSP)."""
    return list(r) if r_q is None else [a + b for a, b in zip(r, r_q, strict=True)]


def challenger_reward(r: Sequence[float], r_q: Sequence[float] | None) -> float:
    """Challenger: ``-V(q)`` (LSP-Zero) or ``-V(q) + V_Q(q)`` (LSP), ``V = mean_j R_j``, ``V_Q = mean_j R_Q_j``."""
    return -mean(r) + (mean(r_q) if r_q is not None else 0.0)


# ------------------------------------------------------------------ watch metrics
_CODE_LINE = re.compile(
    r"^\s*+(def |class |import |from \S+ import |return\b|print\(|for .+:\s*$|while .+:\s*$|if .+:\s*$|elif |else:|try:|except\b"
    r"|#include|public |private |function |const |let |var |[A-Za-z_][\w.\[\]]*\s*[-+*/]?=\s*\S|.*[;{}]\s*$|>>> )"
)


def code_share(text: str) -> float:
    """Share of the non-empty lines that are code: inside ``` fences, or lines that look like code
    (keywords, assignments, lines ending in ; { }). 0 for text with no lines."""
    lines, fenced, inside = [], 0, False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if not line.strip():
            continue
        lines.append(line)
        fenced += inside or bool(_CODE_LINE.match(line))
    return fenced / len(lines) if lines else 0.0


def mostly_code(text: str, threshold: float = 0.5) -> bool:
    """Whether more than ``threshold`` of the answer's lines are code (the paper's reward hack)."""
    return code_share(text) > threshold


def words(text: str) -> int:
    return len(text.split())


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """distinct-n (Li et al., 2016) across texts: unique word n-grams / all word n-grams (0 when none)."""
    grams = [tuple(ws[i : i + n]) for t in texts for ws in [t.lower().split()] for i in range(len(ws) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0
