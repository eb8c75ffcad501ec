"""Skill-SP's rules as pure functions: parsing proposals and answers, the probe majority, rewards.

The spec is ``games/skill_sp/__init__.py``; the env wires these in. Code that
executes model output (validators, tool calls, checks) runs in the sandbox and
is not here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from arena.core.game_types import Invalid
from games.skill_sp.controller import proposer_reward
from games.skill_sp.tools import same_value

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


def json_values(text: str) -> list[Any]:
    """Every JSON object or array that starts somewhere in ``text`` and decodes, in order (outermost first)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while True:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            return out
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        out.append(value)
        i = end


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
    """A solver's response: the whole text as JSON, else the last JSON object or array in it."""
    stripped = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
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
