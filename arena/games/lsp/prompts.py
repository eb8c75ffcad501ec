"""LSP prompt rendering: pure functions from an observation to chat messages.

Our wording of the paper's prompts (arXiv 2509.07414, appendix): the challenger
prompt with its ``{task}`` and ``{template}`` slots, and the 7-criteria
self-reward prompt. Solvers get the raw query with no system prompt; reward
seats get the exchange itself (query as the user turn, answer as the assistant
turn), the way sequence-classification reward models read a conversation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arena.core.types import ChatMessage
from arena.games.lsp.rules import END, START

if TYPE_CHECKING:
    from arena.games.lsp.types import LspObservation

CHALLENGER_PROMPT = (
    "You are the challenger in a game against an AI assistant. Write ONE new query that a user could "
    "send to an AI assistant: {task_line}{template_line}The query must be self-contained and something "
    "a language model can do in text. Do not answer the query, do not hint at its answer, and do not ask "
    "for anything a text-only assistant cannot do. Write the query between "
    f"{START} and {END}, for example:\n{START}\nyour query\n{END}"
)

CRITERIA = (
    "1. The task the user wants done can be identified from the instruction.",
    "2. The instruction is clear and unambiguous.",
    "3. The response is understandable.",
    "4. The response addresses a significant part of the instruction.",
    "5. The response usefully and comprehensively answers the core of the instruction.",
    "6. The response is clearly written and well organised.",
    "7. The user would like the form and the style of the response.",
)

JUDGE_PROMPT = (
    "Rate an AI assistant's response to a user's instruction. Award one point for each criterion it meets:\n"
    + "\n".join(CRITERIA)
    + "\n\n<Instruction>\n{query}\n</Instruction>\n\n<Response>\n{answer}\n</Response>\n\n"
    "Write a short justification, then the sum as <Calculation>1+0+...=k</Calculation>, then the total as "
    "<Score>k</Score> with k an integer from 0 to 7."
)


def challenger_text(task: str, template: str) -> str:
    """The challenger's prompt; an empty task asks for general instructions, an empty template for free form."""
    task_line = f"the query is about {task}. " if task.strip() else "any kind of general instruction. "
    template_line = f"Fill in this template: {template} " if template.strip() else ""
    return CHALLENGER_PROMPT.format(task_line=task_line, template_line=template_line)


def judge_text(query: str, answer: str) -> str:
    """The 7-criteria self-reward prompt for one (query, answer) pair."""
    return JUDGE_PROMPT.format(query=query, answer=answer)


def _opened(messages: list[ChatMessage], prefix: str) -> list[ChatMessage]:
    """``messages`` plus, for a non-empty ``prefix``, an open assistant message the model continues."""
    return [*messages, {"role": "assistant", "content": prefix, "continue_final": True}] if prefix else messages


def render(obs: LspObservation, challenger_prefix: str = "", judge_prefix: str = "") -> list[ChatMessage]:
    """Chat messages for ``obs``; the challenger's and judge's replies may start with a written prefix."""
    if obs.role == "challenger":
        return _opened([{"role": "user", "content": challenger_text(obs.task, obs.template)}], challenger_prefix)
    if obs.role == "solver":
        return [{"role": "user", "content": obs.query}]
    if obs.role == "reward":
        return [{"role": "user", "content": obs.query}, {"role": "assistant", "content": obs.answer}]
    return _opened([{"role": "user", "content": judge_text(obs.query, obs.answer)}], judge_prefix)
