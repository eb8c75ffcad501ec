"""What a game author writes: :class:`GameRules`, the rules API and the optional hooks of every arena
game, with the class attributes a game declares (phases, roles, metrics, bots, zero-sum). The
engine that runs them as a PettingZoo AEC environment (phases, hidden outputs, invalid output,
credit, seeding) is :class:`arena.core.game.LLMGame`, which games subclass; its module docstring
is the contract. Required: :meth:`~GameRules.seat_names`, :meth:`~GameRules.setup`,
:meth:`~GameRules.observe_seat`, :meth:`~GameRules.render_messages`, :meth:`~GameRules.parse`,
:meth:`~GameRules.close_phase`; every other method here has a default. Declarations the conformance kit
checks (:mod:`arena.testing`): ``zero_sum``, ``team_zero_sum`` with :meth:`~GameRules.team`,
:meth:`~GameRules.out_of_game`, and per-reply audiences (:meth:`~GameRules.reply_audience`).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Collection, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import BaseModel

from arena.core.game_types import ActionProbs, GameState, NoOptions, Phase
from arena.core.messages import Message, random_fields
from arena.core.types import ChatMessage, Episode, SeatOutcome

ObsT = TypeVar("ObsT", bound=Message)
CfgT = TypeVar("CfgT", bound=BaseModel)


class GameRules(Generic[ObsT, CfgT], metaclass=ABCMeta):
    """The author's side of a game: declarations, rules and hooks (the engine's attributes they read:
    ``self.config``, ``self.seat_roles``, ``self.episode_id``, ``self.turns``, ``self.possible_agents``)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "llm_game_v0", "render_modes": ["ansi", "human"]}
    config_type: ClassVar[type[BaseModel]]
    #: Scripted bots of this game: a dict name -> bot, or ``module:attribute`` naming one (optional).
    scripted_bots: ClassVar[Any] = ""
    observation_type: ClassVar[type[Message]]
    #: Validates ``reset(options=...)``; the parsed model reaches :meth:`setup`.
    options_type: ClassVar[type[BaseModel]] = NoOptions
    #: Every phase name the game can open (configs naming others are rejected).
    phases: ClassVar[tuple[str, ...]] = ()
    #: Every role a seat can have, where the game knows them up front.
    roles: ClassVar[tuple[str, ...]] = ()
    #: Episode metrics shown in the progress bar and the summary line.
    headline_metrics: ClassVar[tuple[str, ...]] = ()
    #: Plot panels: (title, metric keys as logged, e.g. 'game/x' or 'reward/role').
    plot_panels: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    #: Cross-episode state (optional).
    state_type: ClassVar[type[GameState] | None] = None
    #: Opt-in check of the kit: True if each episode's totals sum to 0, or the phases
    #: whose rewards sum to 0 (in ``na`` invalid mode).
    zero_sum: ClassVar[bool | tuple[str, ...]] = False
    #: Opt-in check of the kit: each episode's rewards are zero-sum by team (:meth:`team`): the seats of one
    #: team end with equal totals and the teams' totals sum to 0 (in ``na`` invalid mode). Two teams: opposite.
    team_zero_sum: ClassVar[bool] = False
    #: A seat meets the same observation again across episodes (poker's information states: a card and a
    #: betting history), so an estimate kept per observation (``obs_baseline``, arena/learners/estimators.py)
    #: gathers samples. False (the default): observations are as good as unique (free text, a drawn passage),
    #: and a per-observation estimator is refused at start-up (``arena.learners.checks.check_game``).
    observations_recur: ClassVar[bool] = False
    #: The game's default training section ({"learner": {...}, "train": {...}}), under
    #: whatever the YAML sets. Without estimators there, every declared phase gets GRPO
    #: with one group per (phase, role) over the step, so a new game trains with no
    #: learner keys.
    training_defaults: ClassVar[dict[str, Any]] = {}

    # ------------------------------------------------------------ shared state
    def make_state(self) -> GameState | None:
        """A fresh cross-episode state for a run of this configuration, if the game has one."""
        return None if self.state_type is None else self.state_type(self.config)  # type: ignore[call-arg]

    def bind_state(self, snapshot: Any) -> None:
        """Give the env the frozen state snapshot later episodes read (``self.shared``)."""
        self.shared = snapshot

    # ------------------------------------------------------------------ rules API
    @abstractmethod
    def seat_names(self) -> Sequence[str]:
        """All seats this configuration can ever have (PettingZoo's possible_agents)."""

    @abstractmethod
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        """Start a new episode with ``rng`` and validated ``options``; return the first phase."""

    def role(self, seat: str) -> str:
        """The seat's role this episode: ``seat_roles`` set in ``setup``, else 'player'."""
        return self.seat_roles.get(seat, "player")

    @abstractmethod
    def observe_seat(self, seat: str) -> ObsT:
        """What ``seat`` sees now, as a typed message."""

    @abstractmethod
    def render_messages(self, observation: ObsT) -> list[ChatMessage]:
        """Render an observation to the chat prompt a model sees (pure)."""

    @abstractmethod
    def parse(self, seat: str, text: str) -> Any:
        """Parse completion text into the game's action, or :class:`Invalid`. Never raises."""

    @abstractmethod
    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        """Apply the rules to the phase's final actions (``Invalid`` for abstentions).

        Call :meth:`credit` for rewards. Return the next phase, or None to end.
        """

    def team(self, seat: str) -> str | None:
        """The seat's team this episode (``team_zero_sum`` checks rewards by it); None: no team (the default)."""
        return None

    def out_of_game(self) -> Collection[str]:
        """Seats eliminated so far (a dead seat): the kit checks that such a seat never moves again and never
        comes back. Default: none."""
        return ()

    def reply_audience(self, seat: str, action: Any) -> Sequence[str]:
        """In a phase declared ``Phase(..., addressed=True)``: the seats that may see ``seat``'s reply, named by
        the reply itself (``action``: its parsed value, or :class:`Invalid`). The writer always may. Default: nobody."""
        return ()

    def group_keys(self, seat: str, phase: str) -> dict[str, str]:
        """Keys advantage estimators group this seat's turn by."""
        return {"episode": self.episode_id, "phase": phase, "role": self.role(seat)}

    def action_examples(self, seat: str) -> Sequence[str]:
        """Well-formed completions for random play (conformance tests).

        Called once per seat while the game is built, before any reset: use
        ``self.config`` only, never episode state set in :meth:`setup`."""
        return ()

    def action_choices(self, seat: str) -> list[str] | None:
        """The replies ``seat`` chooses among at its turn now (its legal actions' texts), or ``None``: free
        generation (the default). A list travels in the runner's request (``Request.choices``): a model backend
        that scores (hf) draws one by its likelihood as the whole reply instead of generating; scripted bots
        ignore it. Each text must parse as its own action."""
        return None

    def uses_choices(self) -> bool:
        """True when this configuration hands model seats choices (:meth:`action_choices`); the config check
        then requires every model seat's backend to score them (hf). Reads ``self.config`` only."""
        return False

    def probe_prompts(self, seat: str) -> dict[str, list[ChatMessage]]:
        """Other prompts for the completion ``seat`` is about to write (e.g. with all skills, with none).

        They cost forward passes in the learner, never rollouts; objective terms name
        them (``jsd_distill``'s ``probe``). Default: none.
        """
        return {}

    def sample_observation(self, rng: np.random.Generator) -> ObsT:
        """A valid random observation; override when fields have constraints."""
        return self.observation_type.model_validate(random_fields(self.observation_type, rng))  # type: ignore[return-value]

    def episode_metrics(self) -> dict[str, float]:
        """Numbers about the finished (or partial) episode, logged as ``game/<key>`` and averaged over a step."""
        return {}

    def step_metrics(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Metrics over a whole step's episodes (e.g. diversity across games), logged as ``game/<key>``."""
        return {}

    def policy_metrics(self, action_probs: ActionProbs) -> dict[str, float] | None:
        """Metrics computed exactly from the seats' action probabilities rather than by playing
        (OpenSpiel games: exploitability). ``action_probs`` answers batches of
        :class:`~arena.core.game_types.ActionQuery`. ``None``: the game has none (the default);
        a game that has them but cannot compute them here raises ``ValueError`` with one line."""
        return None

    def outcome_scores(self) -> dict[str, float]:
        """Each seat's score for :meth:`outcome`; default: its total reward."""
        return {s: sum(t.reward for t in self.turns if t.seat == s) for s in self.possible_agents}

    def outcome(self) -> dict[str, SeatOutcome]:
        """Score and rank per seat (rank 1 is best; equal scores share the best rank)."""
        scores = self.outcome_scores()
        ordered = sorted(scores.values(), reverse=True)
        return {s: SeatOutcome(score=v, rank=ordered.index(v) + 1) for s, v in scores.items()}

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        return {}

    def action_text(self, action: Any) -> str | None:
        """Canonical text of a parsed action, stored in the turn record."""
        return None if action is None else str(action)
