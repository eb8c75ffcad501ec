"""The policy protocol: a batch of chat prompts in, completions with token data out.

One ``generate`` call serves every pending turn the runner gathered for this
policy, across many games. LLM backends read ``messages``; scripted bots read
the typed ``observation``. Completions carry the token ids and the
log-probability of each sampled token under the distribution actually sampled
from (after temperature/top-p), which the learner needs for importance ratios
and the generator/learner logprob-gap health metric.

Prompts longer than a model's context never fail a batch: every model backend
passes each prompt through :func:`fit_prompt` first. ``overflow="truncate"``
keeps the prompt's last tokens (``Completion.prompt_truncated`` records it);
``overflow="end"`` answers that one request with an empty completion whose
``finish_reason`` is ``"overflow"``, which the runner turns into a truncated
episode. The other requests of the batch are generated as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import ChatMessage


class SamplingParams(BaseModel):
    """How to sample one completion."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=1.0, ge=0.0, description="0 means greedy.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(default=256, ge=1, description="Completion token budget.")
    stop: tuple[str, ...] = Field(default=(), description="Strings that end the completion (kept out of it).")


class Request(BaseModel):
    """One turn to generate."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    messages: list[ChatMessage]
    params: SamplingParams = Field(default_factory=SamplingParams)
    seed: int | None = Field(default=None, description="Per-request seed for reproducible sampling.")
    seat: str = ""
    observation: Any = Field(default=None, description="The typed observation, for scripted bots.")
    choices: list[str] | None = Field(
        default=None, description="Replies to choose among instead of generating (a game's legal action texts): a "
        "backend that scores (hf) samples one by its likelihood as the whole reply (arena/policies/choices.py); "
        "scripted bots ignore them. None: free generation.",
    )


FinishReason = Literal["stop", "length", "overflow"]
Overflow = Literal["truncate", "end"]
OVERFLOW_MODES: tuple[str, ...] = ("truncate", "end")


class Completion(BaseModel):
    """What a policy produced for one request."""

    model_config = ConfigDict(extra="forbid")

    text: str
    prompt_ids: list[int] = Field(
        default_factory=list, description="The prompt tokens actually used (after any truncation)."
    )
    completion_ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list, description="One per completion token.")
    finish_reason: FinishReason = Field(
        default="stop",
        description="'stop' (end of sequence or a stop string), 'length' (token budget or context used up), "
        "'overflow' (the prompt did not fit the context and overflow='end': nothing was generated).",
    )
    prompt_truncated: bool = Field(
        default=False, description="True when the prompt's first tokens were dropped to fit the context."
    )
    alternatives: list[list[int]] = Field(default_factory=list, description="The other choices' completion tokens when the reply was chosen among a request's choices (action_mode: score): the learner normalises the chosen reply's likelihood over them.")
    score: float | None = Field(default=None, description="A reward model's score; ``text`` holds repr(score).")


@runtime_checkable
class Policy(Protocol):
    """Anything that turns a batch of requests into completions, in order."""

    name: str

    def generate(self, requests: Sequence[Request]) -> list[Completion]: ...


def chat_prompt_ids(tokenizer: Any, messages: Sequence[ChatMessage]) -> list[int]:
    """Token ids of ``messages`` through the model's chat template, ready for the reply.

    A last assistant message marked ``continue_final`` is left open, so the reply continues it.
    """
    last = messages[-1] if messages else None
    open_end = bool(last and last["role"] == "assistant" and last.get("continue_final"))
    ids = tokenizer.apply_chat_template(
        list(messages), add_generation_prompt=not open_end, continue_final_message=open_end, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


# A prompt cut to a token or two is noise; 16 tokens keep at least the template's
# reply header and the end of the last message.
MIN_PROMPT_TOKENS = 16


def check_overflow(overflow: str) -> Overflow:
    """``overflow`` as given, or a one-line error naming the valid modes."""
    if overflow not in OVERFLOW_MODES:
        raise ValueError(f"overflow must be one of {OVERFLOW_MODES}, got {overflow!r}")
    return overflow  # type: ignore[return-value]


def fit_prompt(
    ids: list[int], max_new_tokens: int, max_len: int, overflow: Overflow
) -> tuple[list[int], int] | None:
    """Fit a prompt and its token budget into a context of ``max_len`` tokens.

    Returns ``(prompt ids, token budget)``, or ``None`` when it does not fit and
    ``overflow == "end"``. The exact rule:

    * ``len(ids) + max_new_tokens <= max_len``: both unchanged;
    * else ``"end"``: ``None``;
    * else ``"truncate"``: the prompt keeps its last ``keep`` tokens, where
      ``keep = max(max_len - max_new_tokens, floor)`` and
      ``floor = min(len(ids), MIN_PROMPT_TOKENS, max_len - 1)``; the budget is
      ``min(max_new_tokens, max_len - keep)``. So the budget is never cut
      while ``floor`` prompt tokens fit beside it; when the budget alone (nearly)
      fills the context it gives way, and at least one new token always fits
      (for ``max_new_tokens >= 1``).

    ``max_new_tokens`` may be 0 (scoring without generating). Keeping the last
    tokens keeps the newest turns and the template's generation prompt; the
    system prompt is what goes first.
    """
    if max_len < 2:
        raise ValueError(f"max_len must be at least 2 (a prompt token and a new token), got {max_len}")
    check_overflow(overflow)
    if len(ids) + max_new_tokens <= max_len:
        return list(ids), max_new_tokens
    if overflow == "end":
        return None
    floor = min(len(ids), MIN_PROMPT_TOKENS, max_len - 1)
    keep = max(max_len - max_new_tokens, floor)
    return list(ids[len(ids) - keep :]), min(max_new_tokens, max_len - keep)


def overflow_completion() -> Completion:
    """The answer to a request whose prompt does not fit the context (``overflow="end"``)."""
    return Completion(text="", finish_reason="overflow")
