"""The household game as a PettingZoo AEC environment: wiring only; the spec is ``arena/games/household/__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from arena.core.game import Invalid, LLMGame, Phase
from arena.core.types import ChatMessage
from arena.games.household import prompts, skills
from arena.games.household.actions import format_action, parse_action
from arena.games.household.tasks import Task, draw_world_id, make_task, satisfied
from arena.games.household.types import HouseholdConfig, HouseholdObservation, HouseholdOptions
from arena.games.household.world import NOTHING, World

PLAYING, SOLVED, OUT_OF_STEPS = "playing", "solved", "out_of_steps"


@dataclass
class Attempt:
    """One seat's copy of the world and how its attempt is going."""

    world: World
    observation: str
    moves: dict[str, tuple[str, ...]]
    history: list[tuple[str, str]] = field(default_factory=list)
    steps: int = 0
    status: str = PLAYING


class HouseholdGame(LLMGame[HouseholdObservation, HouseholdConfig]):
    """G attempts at one household task; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {"name": "household_v0", "render_modes": ["ansi", "human"],
                                          "is_parallelizable": False}
    config_type = HouseholdConfig
    options_type = HouseholdOptions
    observation_type = HouseholdObservation
    scripted_bots = "arena.games.household.bots:BOTS"
    phases = ("act",)
    roles = ("agent",)
    headline_metrics = ("success_rate", "invalid_rate")
    plot_panels = (
        ("success", ("game/success_rate", "game/out_of_steps_rate")),
        ("actions", ("game/invalid_rate", "game/steps")),
    )
    training_defaults: ClassVar[dict[str, Any]] = {
        "learner": {
            "beta": 0.01,  # the public code's KL loss coefficient, k3 estimator (the learner's 0.001 is SpyRL's)
            "kl_estimator": "k3",
            "estimators": {"act": {"name": "grpo", "group_by": ["episode"], "credit": "trajectory"}},
        },
    }

    def __init__(self, config: HouseholdConfig | None = None, render_mode: str | None = None, **overrides: Any):
        super().__init__(config, render_mode, **overrides)
        sk = self.config.skills
        if sk.student == "retrieved" or sk.probes:
            skills.load_library(sk.library)  # a bad library file fails here, not mid-run
        if sk.student == "retrieved" and sk.retriever == "embedding":
            skills.retriever(sk.library, sk.retriever, sk.embedding_model)  # so does a bad embedding model

    def seat_names(self) -> Sequence[str]:
        return [f"agent_{i}" for i in range(self.config.attempts)]

    @staticmethod
    def _index(seat: str) -> int:
        return int(seat.rsplit("_", 1)[1])

    # ----------------------------------------------------------------- episode
    def setup(self, rng: np.random.Generator, options: HouseholdOptions) -> Phase:
        cfg = self.config
        world_id = draw_world_id(rng, cfg.split) if options.world_id is None else options.world_id
        self.task, start = make_task(world_id, cfg.types, cfg.receptacles, cfg.objects)
        self.start = start
        lib = cfg.skills.library
        self.student_skills = (
            skills.student_skills(self.task.description, cfg.skills.k, lib, cfg.skills.retriever, cfg.skills.embedding_model)
            if cfg.skills.student == "retrieved" else ()
        )
        self.teacher_skills = skills.teacher_skills(lib) if cfg.skills.probes else ()
        self.attempts: dict[str, Attempt] = {}
        self.approximate = 0  # actions read by action_match: nearest, not named exactly
        for seat in self.possible_agents:
            world = start.copy()
            self.attempts[seat] = Attempt(world, world.intro(), world.admissible())
        return Phase("act", tuple(self.possible_agents))

    def observe_seat(self, seat: str, skill_texts: tuple[str, ...] | None = None) -> HouseholdObservation:
        a = self.attempts[seat]
        keep = self.config.history
        # Trusted values built here: model_construct skips re-validation (the hot path of every turn).
        return HouseholdObservation.model_construct(
            phase="act" if a.status == PLAYING and not self.done else "done",
            seat_index=self._index(seat),
            task=self.task.description,
            step=a.steps,
            history=tuple(a.history[-keep:]) if keep else (),
            observation=a.observation,
            admissible=tuple(a.moves),
            skills=self.student_skills if skill_texts is None else skill_texts,
        )

    def render_messages(self, observation: HouseholdObservation) -> list[ChatMessage]:
        return prompts.render(observation, self.config.action_prefix)

    def probe_prompts(self, seat: str) -> dict[str, list[ChatMessage]]:
        """AUSO's teacher (all skills) and no-skill contexts for the same state, when ``skills.probes``."""
        if not self.config.skills.probes:
            return {}
        return {
            "teacher": prompts.render(self.observe_seat(seat, self.teacher_skills), self.config.action_prefix),
            "no_skill": prompts.render(self.observe_seat(seat, ()), self.config.action_prefix),
        }

    def parse(self, seat: str, text: str) -> Any:
        text = self.config.action_prefix + text  # the reply continues the written start
        action = parse_action(text, self.attempts[seat].moves, self.config.require_think, self.config.action_match)
        if self.config.action_match == "nearest" and not isinstance(action, Invalid):
            self.approximate += action != parse_action(text, self.attempts[seat].moves, self.config.require_think)
        return action

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        for seat, action in actions.items():
            a = self.attempts[seat]
            if isinstance(action, Invalid):
                feedback, shown = NOTHING, self.outputs("act")[seat].strip().replace("\n", " ")[-80:]
            else:
                feedback, shown = a.world.apply(a.moves[action]), action
            a.history.append((a.observation, shown))
            a.observation = feedback
            a.steps += 1
            if satisfied(a.world, self.task):
                a.status = SOLVED
                self.credit(seat, "act", 1.0)
            elif a.steps >= self.config.max_steps:
                a.status = OUT_OF_STEPS
            a.moves = a.world.admissible() if a.status == PLAYING else {}
        playing = tuple(s for s in self.possible_agents if self.attempts[s].status == PLAYING)
        return Phase("act", playing) if playing else None

    # ----------------------------------------------------------------- extras
    def group_keys(self, seat: str, phase: str) -> dict[str, str]:
        return {"episode": self.episode_id, "phase": phase, "role": "agent", "task_type": self.task.type,
                "world": str(self.task.world_id)}

    def role(self, seat: str) -> str:
        return "agent"

    def episode_metrics(self) -> dict[str, float]:
        if not getattr(self, "attempts", None):
            return {}
        n = len(self.attempts)
        solved = sum(a.status == SOLVED for a in self.attempts.values())
        invalid = sum(1 for t in self.turns if not t.valid)
        return {
            "success_rate": solved / n,
            f"success/{self.task.type}": solved / n,
            "out_of_steps_rate": sum(a.status == OUT_OF_STEPS for a in self.attempts.values()) / n,
            "steps": sum(a.steps for a in self.attempts.values()) / n,
            "invalid_rate": invalid / max(1, len(self.turns)),
            "approximate_rate": self.approximate / max(1, len(self.turns)),
        }

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        if not getattr(self, "task", None):
            return {}
        return {"task_type": self.task.type, "task": self.task.description, "world_id": self.task.world_id,
                "room": self.start.room,
                "out_of_steps": ",".join(s for s, a in self.attempts.items() if a.status == OUT_OF_STEPS)}

    def seat_status(self, seat: str) -> str:
        """``playing``, ``solved`` or ``out_of_steps`` (the attempt's truncation)."""
        return self.attempts[seat].status

    def current_task(self) -> tuple[Task, World]:
        """The task and the untouched starting world of this episode."""
        return self.task, self.start.copy()

    def action_examples(self, seat: str) -> Sequence[str]:
        return [format_action(a) for a in ("look", "inventory", "go to countertop 1", "go to cabinet 1",
                                           "open cabinet 1", "go to sinkbasin 1")]

    def sample_observation(self, rng: np.random.Generator) -> HouseholdObservation:
        k = int(rng.integers(0, 4))
        return HouseholdObservation(
            phase=("act", "done")[int(rng.integers(2))], seat_index=int(rng.integers(8)),
            task="put a mug in/on shelf.", step=k, history=tuple((f"obs {i}", "look") for i in range(k)),
            observation=NOTHING, admissible=("look", "inventory"),
        )


def env(**overrides: Any) -> HouseholdGame:
    """A household game with config overrides, e.g. ``env(attempts=4)``."""
    return HouseholdGame(**overrides)
