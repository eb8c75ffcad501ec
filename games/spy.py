"""SpyRL: who is the odd one out? (``spy_v0``)

Self-verifiable rewards through information asymmetry, after "From RLVR to
RLSVR: Task Transformation Induces Self-Verifiable Rewards for Open-Ended LLM
Self-Improvement" (arXiv 2607.23802) and its public code (RLSVR, branch SpyRL).

Seats
    ``player_0 .. player_{n-1}`` (default n = 5). With ``detector: god`` also
    ``detector_0 .. detector_{k-1}`` (k = ``god_samples``). Seat names never
    reveal the role.

Episode
    1. Draw a source x from the task's data (``task``: summary | story | math;
       ``data_path`` for a user JSONL) and a spy index u uniformly in 0..n-1.
    2. Civilians see x. The spy sees g(x): ONE contiguous span of ``mask_ratio``
       of the units (``mask_unit``: words | chars; default ratio 0.2 for summary
       and story, 0.4 for math) replaced unit by unit with ``mask_token`` ("*"),
       so the spy sees that something is missing and how much. Each player is
       told whether it is the spy.
    3. Phase ``perform`` (hidden): every player does the task on its view and
       ends with a line ``Answer: ...``. Nobody sees another's output.
    4. Phase ``vote`` (hidden): each voter sees its own view and all players'
       answers labelled ``Player k`` (display order shuffled when
       ``shuffle_outputs``) and votes ``\\boxed{k}`` or ``\\boxed{N/A}``.
       Voters are the players (paper) or the god detectors, who see the full
       source (public-code variant).

Action grammar
    perform: the text after the last line starting ``Answer:`` (case-insensitive).
    Missing or empty -> invalid (``require_answer_line: false`` accepts the whole
    text instead). vote: the last balanced ``\\boxed{...}``; ``k`` in 0..n-1
    (``Player k``, ``$k$`` accepted) or ``N/A`` (``NA``, ``none``); anything else
    is invalid and, whatever the invalid-output mode, is not counted as a vote.
    ``vote_format: lenient`` (not the paper's rule, for small models) also reads
    the last ``Player k`` / ``N/A`` mentioned when there is no ``\\boxed{}``.

Rewards (booked per turn; the AEC ``rewards`` are their sums)
    Detection, ``detection_reward: paper``: ``1[v_i == u]`` (N/A, invalid: 0).
    ``shaped`` (public code): correct 2.49 (= 0.3*(2*1-1) + 1.2 + 0.99), wrong -1,
    N/A -0.5, unparseable -1; a spy voter gets -1 for voting itself, +0.2 for
    N/A, +0.5 for any other player.
    Performing, zero-sum: with m_j the valid votes received by player j, mc the
    mean over civilians and nc = n - 1: spy ``-beta*(m_u - mc)``, civilian j
    ``(beta/nc)*(m_u - mc) - lambda*(m_j - mc)``; they sum to exactly 0.
    Invalid turns additionally get ``invalid.penalty`` in penalty/retry mode.

Group keys
    ``episode``, ``phase``, ``role`` (spy | civilian | detector), ``source``.

Deviations from the paper, all deliberate
    * Prompts are our wording of the paper's description, not its verbatim text.
    * Voters see the ``Answer:`` part of each output, never the reasoning, so a
      spy's thinking cannot give it away; an unparseable output is shown as
      ``(no answer)``.
    * Paper-mode detection reward is applied literally to the spy's own vote
      (a spy voting for itself scores 1); the shaped mode has the code's rules.
    * The god detector is k detector seats voting once each (shared weights,
      one batched call) rather than one detector sampled k times.
    * ``vote_format: lenient`` and ``require_answer_line: false`` exist for models
      too small to follow the format at first (the CPU config uses them); the
      defaults are the paper's strict formats.
    * The math source is the problem statement; the verifiable answer is only
      used for metrics (``civilian_correct``), never for rewards.

Version history
    v0: first release.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.game import Invalid, InvalidOutputConfig, LLMGame, Phase
from arena.messages import Message
from arena.types import ChatMessage
from games import spy_prompts
from games.spy_rules import (
    NA,
    Vote,
    detection_reward_paper,
    detection_reward_shaped,
    mask_span,
    parse_answer,
    parse_vote,
    performing_rewards,
    vote_counts,
)
from games.tasks import Source, TaskSource, check_answer, make_source

DEFAULT_MASK_RATIO = {"summary": 0.2, "story": 0.2, "math": 0.4}
DEFAULT_WORDS = {"summary": (None, 500), "story": (300, 500), "math": (None, None)}
NO_ANSWER = "(no answer)"


class SpyConfig(BaseModel):
    """Settings of one SpyRL game; defaults follow the paper."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    n_players: int = Field(default=5, ge=3, le=16, description="Players including the spy (paper 5, code 4).")
    task: Literal["summary", "story", "math"] = Field(default="summary", description="What every player does.")
    data_path: str | None = Field(default=None, description="User JSONL of sources; default: built-in data.")
    mask_ratio: float | None = Field(
        default=None, gt=0.0, lt=1.0, description="Share of the source masked for the spy; None: 0.2 / 0.4 (math)."
    )
    mask_unit: Literal["words", "chars"] = Field(default="words", description="Unit of the masked span.")
    mask_token: str = Field(default="*", min_length=1, max_length=8, description="Replaces each masked unit.")
    min_words: int | None = Field(default=None, ge=1, description="Length asked of outputs; None: task default.")
    max_words: int | None = Field(default=None, ge=1, description="Length asked of outputs; None: task default.")
    require_answer_line: bool = Field(default=True, description="Performing output must have an 'Answer:' line.")
    vote_format: Literal["boxed", "lenient"] = Field(
        default="boxed", description="boxed: only \\boxed{k} (paper); lenient: also the last 'Player k' / 'N/A' mentioned."
    )
    shuffle_outputs: bool = Field(default=False, description="Show outputs to voters in a random order.")
    detector: Literal["players", "god"] = Field(
        default="players", description="players: everyone votes (paper); god: separate full-view detectors (code)."
    )
    god_samples: int = Field(default=8, ge=1, le=32, description="Detector seats when detector is god (8 / 4 math).")
    detection_reward: Literal["paper", "shaped"] = Field(default="paper", description="paper: 1[v == u]; shaped: code.")
    beta: float = Field(default=0.1, ge=0.0, description="Weight of the spy term of the performing reward.")
    lam: float = Field(default=0.1, ge=0.0, alias="lambda", description="Weight of the civilian term.")
    invalid: InvalidOutputConfig = Field(default_factory=InvalidOutputConfig, description="Unparseable output.")

    @model_validator(mode="after")
    def _words_ordered(self) -> SpyConfig:
        lo, hi = self.word_range
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_words ({lo}) must not exceed max_words ({hi})")
        return self

    @property
    def ratio(self) -> float:
        return self.mask_ratio if self.mask_ratio is not None else DEFAULT_MASK_RATIO[self.task]

    @property
    def word_range(self) -> tuple[int | None, int | None]:
        lo, hi = DEFAULT_WORDS[self.task]
        return (self.min_words if self.min_words is not None else lo, self.max_words or hi)


class SpyObservation(Message):
    """What one seat sees. ``outputs`` stay empty until the vote phase."""

    phase: Literal["perform", "vote", "done"]
    role: Literal["spy", "civilian", "detector"]
    seat_index: int = Field(ge=0)
    n_players: int = Field(ge=2)
    task: Literal["summary", "story", "math"]
    view: str
    mask_token: str = "*"
    min_words: int | None = None
    max_words: int | None = None
    outputs: tuple[str, ...] = ()
    output_players: tuple[int, ...] = ()


class SpyGame(LLMGame[SpyObservation, SpyConfig]):
    """SpyRL as a PettingZoo AEC environment; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "spy_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
    }
    config_type = SpyConfig
    scripted_bots = "games.spy_bots:BOTS"
    observation_type = SpyObservation

    def __init__(self, config: SpyConfig | None = None, render_mode: str | None = None, **overrides: Any):
        super().__init__(config, render_mode, **overrides)
        self.source_pool: TaskSource = make_source(self.config.task, self.config.data_path)

    # ----------------------------------------------------------------- seats
    @property
    def players(self) -> list[str]:
        return [f"player_{i}" for i in range(self.config.n_players)]

    @property
    def voters(self) -> list[str]:
        if self.config.detector == "god":
            return [f"detector_{i}" for i in range(self.config.god_samples)]
        return self.players

    def seat_names(self) -> Sequence[str]:
        extra = self.voters if self.config.detector == "god" else []
        return [*self.players, *extra]

    def role(self, seat: str) -> str:
        if seat.startswith("detector_"):
            return "detector"
        return "spy" if self._index(seat) == self.spy else "civilian"

    @staticmethod
    def _index(seat: str) -> int:
        return int(seat.rsplit("_", 1)[1])

    # ----------------------------------------------------------------- episode
    def setup(self, rng: np.random.Generator) -> Phase:
        cfg = self.config
        self.source: Source = self.source_pool.sample(rng)
        self.spy = int(rng.integers(cfg.n_players))
        self.masked = mask_span(self.source.text, cfg.ratio, rng, cfg.mask_unit, cfg.mask_token)
        order = rng.permutation(cfg.n_players) if cfg.shuffle_outputs else np.arange(cfg.n_players)
        self.display_order = tuple(int(i) for i in order)
        self.answers: dict[int, str] = {}
        self.votes: dict[str, Vote | None] = {}
        return Phase("perform", tuple(self.players))

    def observe_seat(self, seat: str) -> SpyObservation:
        role = self.role(seat)
        lo, hi = self.config.word_range
        voting = bool(self.answers)
        return SpyObservation(
            phase=self.phase.name if not self.done else "done",  # type: ignore[arg-type]
            role=role,  # type: ignore[arg-type]
            seat_index=self._index(seat),
            n_players=self.config.n_players,
            task=self.config.task,
            view=self.masked.text if role == "spy" else self.source.text,
            mask_token=self.config.mask_token,
            min_words=lo,
            max_words=hi,
            outputs=tuple(self.answers[k] for k in self.display_order) if voting else (),
            output_players=self.display_order if voting else (),
        )

    def render_messages(self, observation: SpyObservation) -> list[ChatMessage]:
        return spy_prompts.render(observation)

    def parse(self, seat: str, text: str) -> Any:
        if self.phase.name == "perform":
            answer = parse_answer(text, self.config.require_answer_line)
            return Invalid(reason="no non-empty line starting with 'Answer:'") if answer is None else answer
        return parse_vote(text, self.config.n_players, lenient=self.config.vote_format == "lenient")

    def action_text(self, action: Any) -> str | None:
        return str(action)

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        if phase.name == "perform":
            self.answers = {
                self._index(s): (NO_ANSWER if isinstance(a, Invalid) else a) for s, a in actions.items()
            }
            return Phase("vote", tuple(self.voters))
        self.votes = {s: (None if isinstance(a, Invalid) else a) for s, a in actions.items()}
        self._book_rewards()
        return None

    def _book_rewards(self) -> None:
        cfg = self.config
        counts = vote_counts(list(self.votes.values()), cfg.n_players)
        for j, r in enumerate(performing_rewards(counts, self.spy, cfg.beta, cfg.lam)):
            self.credit(f"player_{j}", "perform", r)
        for seat, vote in self.votes.items():
            if cfg.detection_reward == "paper":
                r = detection_reward_paper(vote, self.spy)
            else:
                is_spy = self.role(seat) == "spy"
                r = detection_reward_shaped(vote, self.spy, is_spy, self._index(seat) if is_spy else None)
            self.credit(seat, "vote", r)

    # ----------------------------------------------------------------- extras
    def group_keys(self, seat: str, phase: str) -> dict[str, str]:
        return {"episode": self.episode_id, "phase": phase, "role": self.role(seat), "source": self.source.id}

    def action_examples(self, seat: str) -> Sequence[str]:
        votes = [f"Thinking done.\n\\boxed{{{k}}}" for k in range(self.config.n_players)]
        return [*votes, "\\boxed{N/A}", "I compared the outputs.\nAnswer: a short summary."]

    def sample_observation(self, rng: np.random.Generator) -> SpyObservation:
        n = int(rng.integers(3, 8))
        phase = ("perform", "vote", "done")[int(rng.integers(3))]
        outputs = tuple(f"output {k}" for k in range(n)) if phase != "perform" else ()
        return SpyObservation(
            phase=phase,  # type: ignore[arg-type]
            role=("spy", "civilian", "detector")[int(rng.integers(3))],  # type: ignore[arg-type]
            seat_index=int(rng.integers(n)),
            n_players=n,
            task=("summary", "story", "math")[int(rng.integers(3))],  # type: ignore[arg-type]
            view=f"source text {int(rng.integers(1000))}",
            outputs=outputs,
            output_players=tuple(range(len(outputs))),
        )

    def episode_metrics(self) -> dict[str, float]:
        if not self.votes:
            return {}
        votes = list(self.votes.values())
        n = len(votes)
        counts = vote_counts(votes, self.config.n_players)
        top = max(counts)
        metrics = {
            "detection_accuracy": sum(v == self.spy and isinstance(v, int) for v in votes) / n,
            "na_rate": sum(v == NA for v in votes) / n,
            "parseable_vote_rate": sum(v is not None for v in votes) / n,
            "spy_caught": float(top > 0 and counts[self.spy] == top and counts.count(top) == 1),
            "answer_rate": sum(a != NO_ANSWER for a in self.answers.values()) / len(self.answers),
        }
        if self.source.answer is not None:
            civ = [check_answer(self.source, self.answers[j]) for j in self.answers if j != self.spy]
            metrics["civilian_correct"] = sum(civ) / len(civ)
            metrics["spy_correct"] = float(check_answer(self.source, self.answers[self.spy]))
        return metrics

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        return {
            "spy": f"player_{self.spy}",
            "source_id": self.source.id,
            "mask_start": self.masked.start,
            "mask_length": self.masked.length,
        }


def env(**kwargs: Any) -> SpyGame:
    """PettingZoo-style constructor: ``env(n_players=4, task="math")``."""
    return SpyGame(**kwargs)
