"""Skill-SP's prompts: pure rendering of observations to chat messages."""

from __future__ import annotations

import inspect

from arena.core.types import ChatMessage
from arena.games.skill_sp import tools
from arena.games.skill_sp.types import SkillSpObservation

CALL_FORMAT = (
    'Reply with JSON tool calls only: one call {"tool": NAME, "args": {...}} or a list of calls run in order; '
    'an argument "$0", "$1", ... stands for the result of an earlier call. The last call\'s result is your answer.'
)


def tool_list(names: tuple[str, ...] | list[str]) -> str:
    """One line per tool: its signature and the first line of its docstring."""
    lines = []
    for name in names:
        fn = tools.TOOLS.get(name)
        if fn is not None:
            doc = (fn.__doc__ or "").strip().splitlines()[0]
            lines.append(f"- {name}{str(inspect.signature(fn)).replace(chr(39), '')}: {doc}")
    return "\n".join(lines)


def proposer_messages(obs: SkillSpObservation) -> list[ChatMessage]:
    head = (
        "You write one new task for a solver, plus a hidden contract that lets a program check the solver's reply. "
        'Reply with one JSON object: {"task": "<the prompt the solver sees>", "contract": {...}}. '
        'The contract holds the reference "answer"; for a tool-use task also "calls", the reference tool calls '
        "whose last result is the answer. Aim for a task a solver gets right about half the time."
    )
    if not obs.skill:
        body = (
            "Write any tool-use or logic task. Tools the solver can call:\n" + tool_list(sorted(tools.TOOLS))
            + "\nA logic task's contract is just the answer (any JSON value) and the facts that fix it."
        )  # fmt: skip
    else:
        body = (
            f"Skill: {obs.skill} - {obs.description}\n\nRules:\n{obs.rules}\n\nGeneration hints:\n{obs.hints}\n"
            + (f"\nTools:\n{tool_list(obs.tools)}\n" if obs.tools else "")
            + f"\nExample task: {obs.example_task}\nExample contract: {obs.example_contract}"
        )
    return [{"role": "system", "content": head}, {"role": "user", "content": body}]


def solver_messages(obs: SkillSpObservation) -> list[ChatMessage]:
    if obs.kind == "tool_use":
        how = f"{CALL_FORMAT}\nTools:\n{tool_list(sorted(tools.TOOLS))}"
    else:
        how = "Reply with the answer as JSON only (an object, a list, a number or a string, as the task asks)."
    if obs.skill:  # solver_sees_skill: the routed skill's description and rules
        how += f"\n\nSkill: {obs.skill} - {obs.description}\nSkill rules:\n{obs.rules}"
    return [{"role": "system", "content": how}, {"role": "user", "content": obs.task}]


def render(obs: SkillSpObservation) -> list[ChatMessage]:
    return proposer_messages(obs) if obs.role == "proposer" else solver_messages(obs)
