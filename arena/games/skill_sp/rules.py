"""Skill-SP's rules as pure functions: parsing proposals and answers, the probe majority, rewards.

The spec is ``arena/games/skill_sp/__init__.py``; the env wires these in. Code that
executes model output (validators, tool calls, checks) runs in the sandbox and
is not here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from arena.core.game_types import Invalid
from arena.core.types import safe_text
from arena.games.skill_sp.controller import proposer_reward
from arena.games.skill_sp.tools import same_value

MAX_PROMPT_CHARS = 2000
MAX_CONTRACT_CHARS = 6000


@dataclass(frozen=True)
class Proposal:
    """A parsed proposal: the visible prompt and the hidden contract."""

    prompt: str
    contract: dict[str, Any]

    @property
    def kind(self) -> str:
        """tool_use when the contract carries reference tool calls, else logic."""
        return "tool_use" if "calls" in self.contract else "logic"


MAX_JSON_DEPTH = 64  # nesting of a JSON value read from a reply; deeper values are skipped (as the sandbox's MAX_DEPTH)
_JSON_START = re.compile(r"[{\[]")
_TOO_DEEP = object()


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (0 for a scalar), without recursion."""
    depth, level = 0, [(value, 0)]
    while level:
        x, d = level.pop()
        if isinstance(x, (list, dict)):
            depth = max(depth, d + 1)
            level.extend((v, d + 1) for v in (x.values() if isinstance(x, dict) else x))
    return depth


def safe_value(value: Any) -> Any:
    """A decoded JSON value with every string in it, keys included, cleaned as a reply is
    (:func:`~arena.core.types.safe_text`): JSON's ``"\\ud800"`` escape decodes to a lone surrogate even in a
    clean reply, and one would make the episode unwritable. Two keys that differ only in lone surrogates
    become one (the later value). Returns ``value`` itself when it is clean; recursion is bounded by
    MAX_JSON_DEPTH (callers check the depth first)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        items = [safe_value(v) for v in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(safe_text(k) if isinstance(k, str) else k, safe_value(v)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value


#: What a start that fails on nesting (``RecursionError``, ~1,000 levels) costs, in characters read: the
#: decoder's descent and unwinding measure as 13,000-18,000 characters of plain decoding (0.1-0.2 ms).
_NESTING_FAILURE_COST = 20_000


def _decode(decoder: json.JSONDecoder, text: str, start: int) -> tuple[Any, int] | int:
    """``raw_decode`` at ``start``: the value (``_TOO_DEEP`` when nested deeper than MAX_JSON_DEPTH) and its
    end, or, failing, how far it read (what it cost, for a failure on nesting)."""
    try:
        value, end = decoder.raw_decode(text, start)
    except json.JSONDecodeError as e:
        return max(e.pos, start + 1)
    except RecursionError:
        return start + _NESTING_FAILURE_COST
    except ValueError:
        return min(len(text), start + 2000)
    return (safe_value(value) if json_depth(value) <= MAX_JSON_DEPTH else _TOO_DEEP), end


_MAX_FAILED_STARTS = 20_000
_REBASE = 4096


def json_values(text: str) -> list[Any]:
    """Every JSON object or array that starts somewhere in ``text`` and decodes, in order (outermost first),
    cleaned (:func:`safe_value`).

    Values nested deeper than MAX_JSON_DEPTH are skipped whole. So that a long unclosed reply (``{{{{...``,
    ``[[[[...``) costs linear time, the failed attempts may read about four times the text in all and
    number at most 20,000; a reply within those bounds (every well-formed one) gets the result of trying
    every start. The text is re-sliced as the search moves on: a decoding error counts lines from the start
    of the string it is given, which would make every failure cost the whole prefix."""
    decoder, out, doc, i = json.JSONDecoder(), [], text, 0
    budget, failures = 4 * len(text) + 100_000, 0
    while (found := _JSON_START.search(doc, i)) is not None:
        start = found.start()
        if start > _REBASE:
            doc, start = doc[start:], 0
        got = _decode(decoder, doc, start)
        if isinstance(got, int):
            budget -= got - start
            failures += 1
            if budget < 0 or failures > _MAX_FAILED_STARTS:
                return out
            i = start + 1
            continue
        if got[0] is not _TOO_DEEP:
            out.append(got[0])
        i = got[1]
    return out


def parse_proposal(text: str) -> Proposal | Invalid:
    """The last JSON object with a string ``task`` and an object ``contract`` holding ``answer``."""
    for value in reversed(json_values(text)):
        if isinstance(value, dict) and isinstance(value.get("task"), str) and isinstance(value.get("contract"), dict):
            prompt, contract = value["task"].strip(), value["contract"]
            if not prompt:
                return Invalid(reason="the task is empty")
            if len(prompt) > MAX_PROMPT_CHARS or len(json.dumps(contract)) > MAX_CONTRACT_CHARS:
                return Invalid(reason="the task or the contract is too long")
            if "answer" not in contract:
                return Invalid(reason='the contract has no "answer"')
            return Proposal(prompt, contract)
    return Invalid(reason='no JSON object {"task": ..., "contract": {...}} found')


def parse_answer(text: str) -> Any:
    """A solver's response: the whole text as JSON, else the last JSON object or array in it (cleaned,
    :func:`safe_value`)."""
    stripped = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    else:
        if json_depth(value) <= MAX_JSON_DEPTH:
            return safe_value(value)
    found = json_values(text)
    return found[-1] if found else Invalid(reason="no JSON answer found")


def canonical(value: Any) -> str:
    """A stable key for an answer for counting votes: floats to 6 significant digits, 42.0 as 42."""

    def norm(x: Any) -> Any:
        if isinstance(x, float) and math.isfinite(x):
            y = float(f"{x:.6g}")
            return int(y) if y.is_integer() else y
        if isinstance(x, list):
            return [norm(v) for v in x]
        if isinstance(x, dict):
            return {str(k): norm(v) for k, v in x.items()}
        return x

    return json.dumps(norm(value), sort_keys=True)


@dataclass(frozen=True)
class ProbeVerdict:
    """What K probe attempts say about a task."""

    v_solve: float  # share of probes the contract's checker accepts
    majority: str | None  # canonical answer of the unique plurality, None if tied or no answers
    consistent: bool  # the unique majority equals the contract's answer


def probe_verdict(correct: Sequence[bool], answers: Sequence[Any], contract_answer: Any, k: int) -> ProbeVerdict:
    """``v_solve = sum(correct) / k``; the majority is the unique most frequent answer among probes
    that produced one (``None`` entries abstain); consistent iff it equals the contract's answer."""
    if k <= 0:
        raise ValueError("k must be positive")
    counts: dict[str, int] = {}
    first: dict[str, Any] = {}
    for a in answers:
        if a is None:
            continue
        key = canonical(a)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, a)
    ranked = sorted(counts.values(), reverse=True)
    unique = bool(ranked) and (len(ranked) == 1 or ranked[0] > ranked[1])
    majority = max(counts, key=counts.__getitem__) if unique else None
    consistent = majority is not None and same_value(first[majority], contract_answer)
    return ProbeVerdict(sum(map(bool, correct)) / k, majority, consistent)


def proposal_reward(parsed: bool, verified: bool, verdict: ProbeVerdict | None) -> float:
    """The proposer's reward: -1 unparsed, 0 rejected by validators, else ``1[valid](1 - 2|v_solve - 0.5|)``."""
    if not parsed:
        return proposer_reward(False, False, 0.0)
    if not verified or verdict is None:
        return 0.0
    return proposer_reward(True, verdict.consistent, verdict.v_solve)
