"""SpyRL as a PettingZoo AEC environment: it only wires the rules; the spec is ``arena/games/spy/__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from arena.core.game import Invalid, LLMGame, Phase
from arena.core.types import ChatMessage
from arena.games.spy import prompts
from arena.games.spy.rules import (
    NA,
    Vote,
    detection_reward_paper,
    detection_reward_shaped,
    mask_fact,
    mask_span,
    parse_answer,
    parse_vote,
    performing_rewards,
    spy_caught,
    vote_counts,
)
from arena.games.spy.types import SpyConfig, SpyObservation, SpyOptions
from arena.games.tasks import Corpus, Source, TaskSource, check_answer, make_source

NO_ANSWER = "(no answer)"


class SpyGame(LLMGame[SpyObservation, SpyConfig]):
    """SpyRL as a PettingZoo AEC environment; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "spy_v1",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
    }
    config_type = SpyConfig
    options_type = SpyOptions
    scripted_bots = "arena.games.spy.bots:BOTS"
    observation_type = SpyObservation
    phases = ("perform", "vote")
    roles = ("spy", "civilian", "detector")
    zero_sum = ("perform",)
    headline_metrics = ("detection_accuracy", "parseable_vote_rate")
    #: arena.rank.eval's pooled ratios (arena/rank/compare.py): accuracy among votes naming a player, against chance 1/n.
    eval_ratios = {"named_vote_accuracy": ("detection_accuracy", "parseable_vote_rate - na_rate", "1/n_players")}
    plot_panels = (
        ("reward per role", ("reward/spy", "reward/civilian", "reward/detector")),
        ("detection", ("game/detection_accuracy", "game/na_rate", "game/parseable_vote_rate", "game/spy_caught")),
    )

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
    def setup(self, rng: np.random.Generator, options: SpyOptions) -> Phase:
        cfg = self.config
        # The draws happen whatever the options fix, so a fixed spy leaves the
        # source, the mask and the order exactly as the seed alone would give them.
        self.source: Source = self.source_pool.sample(rng)
        self.spy = int(rng.integers(cfg.n_players))
        if options.source_id is not None:
            self.source = self._source_by_id(options.source_id)
        if options.spy is not None:
            if options.spy >= cfg.n_players:
                raise ValueError(f"options.spy: {options.spy} is not a player index (0..{cfg.n_players - 1})")
            self.spy = options.spy
        fact = mask_fact(self.source.text, rng, cfg.mask_token) if cfg.mask == "fact" else None
        self.mask_kind = "fact" if fact is not None else "span"
        self.masked = fact or mask_span(self.source.text, cfg.ratio, rng, cfg.mask_unit, cfg.mask_token)
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
            mask=self.mask_kind,  # type: ignore[arg-type]
            min_words=lo,
            max_words=hi,
            outputs=tuple(self.answers[k] for k in self.display_order) if voting else (),
            output_players=self.display_order if voting else (),
        )

    def _source_by_id(self, source_id: str) -> Source:
        if not isinstance(self.source_pool, Corpus):
            raise ValueError(f"options.source_id: task {self.config.task!r} draws sources procedurally; fix the seed instead")
        for k in range(len(self.source_pool)):
            if self.source_pool[k].id == source_id:
                return self.source_pool[k]
        raise ValueError(f"options.source_id: no source {source_id!r} in the task's data")

    def render_messages(self, observation: SpyObservation) -> list[ChatMessage]:
        return prompts.render(observation)

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
        metrics = {
            "detection_accuracy": sum(v == self.spy and isinstance(v, int) for v in votes) / n,
            "na_rate": sum(v == NA for v in votes) / n,
            "parseable_vote_rate": sum(v is not None for v in votes) / n,
            "spy_caught": float(spy_caught(counts, self.spy)),
            "answer_rate": sum(a != NO_ANSWER for a in self.answers.values()) / len(self.answers),
        }
        if self.source.answer is not None:
            civ = [check_answer(self.source, self.answers[j]) for j in self.answers if j != self.spy]
            metrics["civilian_correct"] = sum(civ) / len(civ)
            metrics["spy_correct"] = float(check_answer(self.source, self.answers[self.spy]))
        return metrics

    def outcome_scores(self) -> dict[str, float]:
        """The spy wins (1) when it is not the only most-voted player, the civilians win when it is;
        a detector scores 1 when its vote named the spy."""
        caught = spy_caught(vote_counts(list(self.votes.values()), self.config.n_players), self.spy)
        scores = {p: float(caught if self.role(p) == "civilian" else not caught) for p in self.players}
        if self.config.detector == "god":
            scores |= {d: float(self.votes.get(d) == self.spy) for d in self.voters}
        return scores

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        return {
            "spy": f"player_{self.spy}",
            "source_id": self.source.id,
            "mask_start": self.masked.start,
            "mask_length": self.masked.length,
            "mask": self.mask_kind,
        }


def env(**kwargs: Any) -> SpyGame:
    """PettingZoo-style constructor: ``env(n_players=4, task="math")``."""
    return SpyGame(**kwargs)
