"""LSP's typed settings and observations (the spec is ``arena/games/lsp/__init__.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from arena.core.game import GameConfig, InvalidOutputConfig
from arena.core.messages import Message

Mode = Literal["lsp_zero", "lsp"]
TaskReward = Literal["reward_model", "verifier"]


class LspConfig(GameConfig):
    """Settings of one LSP episode (one query of the paper's Algorithm 1); defaults follow the paper."""

    mode: Mode = Field(default="lsp", description="lsp_zero: task reward R only; lsp: R plus the self-reward R_Q.")
    n_solvers: int = Field(default=4, ge=1, le=64, description="G: solver seats answering each query (paper: not reported).")
    task: str = Field(default="", max_length=500, description="{task} of the challenger prompt; empty: general instructions.")
    template: str = Field(default="", max_length=2000, description="{template} of the challenger prompt; empty: free form.")
    query_format: Literal["strict", "lenient"] = Field(
        default="strict",
        description="strict: the query is the text between [Start Generation] and [End Generation] (paper); "
        "lenient: also the text after a lone [Start Generation], else the first non-empty line.",
    )
    challenger_prefix: str = Field(
        default="",
        max_length=500,
        description="Start of the challenger's reply, written for it (an open assistant message the model "
        "continues); the query is read from prefix + reply. Paper: empty.",
    )
    judge_prefix: str = Field(
        default="",
        max_length=200,
        description="Start of the judge's reply, written for it (e.g. '<Score>', so its next token is the "
        "score); the verdict is parsed from prefix + reply. Paper: empty.",
    )
    max_query_chars: int = Field(default=2000, ge=8, description="Longer extracted queries are cut to this many characters.")
    task_reward: TaskReward = Field(
        default="reward_model",
        description="reward_model: R(q, a) from the reward-model seats (paper); verifier: checked by `verifier`.",
    )
    verifier: Literal["arithmetic"] = Field(default="arithmetic", description="Verifier used when task_reward is verifier.")
    final_answer: Literal["last", "after_equals"] = Field(
        default="last",
        description="The verifier's reading of an answer: last: the last \\boxed{} or last number; "
        "after_equals: the number after the first '=', else as last.",
    )
    unparseable_reward: float = Field(default=0.0, description="R when a reward seat's reply is not a finite number.")
    unparseable_score: int = Field(default=0, ge=0, le=7, description="R_Q when the judge writes no <Score>k</Score> in 0..7.")
    invalid: InvalidOutputConfig = Field(
        default_factory=lambda: InvalidOutputConfig(mode="penalty", penalty=-1.0),
        description="A challenger output without a (checkable) query: the game ends; penalty mode books `penalty` on it.",
    )
    code_threshold: float = Field(
        default=0.5, ge=0.0, le=1.0, description="An answer is 'mostly code' when more than this share of its lines is code."
    )
    ngram: int = Field(default=2, ge=1, le=5, description="n of the distinct-n diversity of a step's queries.")

    @property
    def referee_seats(self) -> bool:
        """Whether a referee phase is played (a reward model, or the R_Q judge)."""
        return self.task_reward == "reward_model" or self.mode == "lsp"


class LspObservation(Message):
    """What one seat sees: the challenger its task and template, a solver the query,
    a referee the query and ONE answer."""

    phase: Literal["challenge", "solve", "referee", "done"]
    role: Literal["challenger", "solver", "reward", "judge"]
    seat_index: int = Field(ge=0)
    task: str = ""
    template: str = ""
    query: str = ""
    answer: str = ""
