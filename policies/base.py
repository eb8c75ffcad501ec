"""The policy protocol: a batch of chat prompts in, completions with token data out.

One ``generate`` call serves every pending turn the runner gathered for this
policy, across many games. LLM backends read ``messages``; scripted bots read
the typed ``observation``. Completions carry the token ids and the
log-probability of each sampled token under the distribution actually sampled
from (after temperature/top-p), which the learner needs for importance ratios
and the generator/learner logprob-gap health metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from arena.types import ChatMessage


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


class Completion(BaseModel):
    """What a policy produced for one request."""

    model_config = ConfigDict(extra="forbid")

    text: str
    prompt_ids: list[int] = Field(default_factory=list)
    completion_ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list, description="One per completion token.")
    finish_reason: str = Field(default="stop", description="'stop' or 'length'.")


@runtime_checkable
class Policy(Protocol):
    """Anything that turns a batch of requests into completions, in order."""

    name: str

    def generate(self, requests: Sequence[Request]) -> list[Completion]: ...


def chat_prompt_ids(tokenizer: Any, messages: Sequence[ChatMessage]) -> list[int]:
    """Token ids of ``messages`` through the model's chat template, ready for the reply."""
    ids = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
