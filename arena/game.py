"""``LLMGame``: the PettingZoo AEC base every arena game derives from.

A game writes only its rules; this class wires them into PettingZoo:

* **Actions are completion text.** ``step(text)`` hands the text to the game's
  ``parse``; any string is legal input.
* **Phases.** A game is a sequence of :class:`Phase` objects. Within a *hidden*
  phase the acting seats move one after another in AEC order, but nobody can
  read another seat's output until the phase closes: outputs of an open phase
  are only reachable through :meth:`LLMGame.outputs`, which refuses while the
  phase is open. Because of that, all pending seats of a hidden phase can be
  generated in one batch (:meth:`LLMGame.pending_seats`).
* **Invalid output** (``parse`` returned :class:`Invalid`) follows the game's
  :class:`InvalidOutputConfig`: ``na`` hands the game an abstention, ``penalty``
  also credits a fixed penalty to that turn, ``retry`` asks the seat again (with
  the reason appended to its prompt) up to a budget, then behaves as
  ``penalty``. Every attempt is a :class:`~arena.types.Turn` and is counted in
  ``infos``.
* **Per-turn rewards.** ``credit(seat, phase, amount)`` books a reward on the
  seat's final turn of that phase. The same amounts flow into PettingZoo's
  ``rewards`` / ``_cumulative_rewards`` at the step that earned them, so the AEC
  totals and the per-turn records always agree.
* **Seeding.** Each env owns a ``numpy.random.Generator``; ``reset(seed=s)``
  replaces it, ``reset()`` continues it. Nothing touches global random state.

Subclasses implement :meth:`setup`, :meth:`observe_seat`, :meth:`render_messages`,
:meth:`parse`, :meth:`close_phase` and :meth:`role`; optionally
:meth:`group_keys`, :meth:`action_examples`, :meth:`episode_metrics`.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pettingzoo import AECEnv
from pydantic import BaseModel, ConfigDict, Field

from arena.messages import CompletionSpace, Message, MessageSpace, random_fields
from arena.types import ChatMessage, Episode, Turn

ObsT = TypeVar("ObsT", bound=Message)
CfgT = TypeVar("CfgT", bound=BaseModel)


class Invalid(BaseModel):
    """What ``parse`` returns for text that is not a legal action."""

    model_config = ConfigDict(frozen=True)
    reason: str


class InvalidOutputConfig(BaseModel):
    """How a game treats a completion it cannot parse."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["na", "penalty", "retry"] = Field(
        default="na",
        description="na: treat as abstention; penalty: abstention plus `penalty` on the turn; "
        "retry: ask again up to `retries` times, then as penalty.",
    )
    penalty: float = Field(default=-1.0, description="Reward added to an invalid turn (penalty/retry modes).")
    retries: int = Field(default=1, ge=0, le=10, description="Extra attempts per seat and phase (retry mode).")


@dataclass(frozen=True)
class Phase:
    """A stage of the game in which ``seats`` act once each, in order."""

    name: str
    seats: tuple[str, ...]
    hidden: bool = True


class LLMGame(AECEnv, Generic[ObsT, CfgT], metaclass=ABCMeta):
    """Base class of text games; see the module docstring for the contract."""

    metadata: ClassVar[dict[str, Any]] = {"name": "llm_game_v0", "render_modes": ["ansi", "human"]}
    config_type: ClassVar[type[BaseModel]]
    #: ``module:attribute`` of a dict of scripted bots for this game (optional).
    scripted_bots: ClassVar[str] = ""
    observation_type: ClassVar[type[Message]]

    def __init__(self, config: CfgT | None = None, render_mode: str | None = None, **overrides: Any):
        super().__init__()
        if config is None:
            config = self.config_type.model_validate(overrides)
        elif overrides:
            config = config.model_copy(update=overrides)
        self.config: CfgT = config  # type: ignore[assignment]
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.possible_agents = list(self.seat_names())
        self._action_spaces = {s: CompletionSpace(self.action_examples(s)) for s in self.possible_agents}
        self._observation_spaces = {
            s: MessageSpace(self.observation_type, self.sample_observation) for s in self.possible_agents
        }
        self._rng: np.random.Generator | None = None
        self._seed: int | None = None
        self.agents: list[str] = []

    # ------------------------------------------------------------------ rules API
    @abstractmethod
    def seat_names(self) -> Sequence[str]:
        """All seats this configuration can ever have (PettingZoo's possible_agents)."""

    @abstractmethod
    def setup(self, rng: np.random.Generator) -> Phase:
        """Start a new episode with ``rng``; return the first phase."""

    @abstractmethod
    def role(self, seat: str) -> str:
        """The seat's role this episode (may depend on the draw, e.g. spy)."""

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

    def group_keys(self, seat: str, phase: str) -> dict[str, str]:
        """Keys advantage estimators group this seat's turn by."""
        return {"episode": self.episode_id, "phase": phase, "role": self.role(seat)}

    def action_examples(self, seat: str) -> Sequence[str]:
        """Well-formed completions for random play (conformance tests)."""
        return ()

    def sample_observation(self, rng: np.random.Generator) -> ObsT:
        """A valid random observation; override when fields have constraints."""
        return self.observation_type.model_validate(random_fields(self.observation_type, rng))  # type: ignore[return-value]

    def episode_metrics(self) -> dict[str, float]:
        return {}

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        return {}

    def action_text(self, action: Any) -> str | None:
        """Canonical text of a parsed action, stored in the turn record."""
        return None if action is None else str(action)

    # ------------------------------------------------------------- PettingZoo API
    def observation_space(self, agent: str) -> MessageSpace:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> CompletionSpace:
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        elif self._rng is None:
            self._rng = np.random.default_rng()
        self._seed = seed
        self.episode_id = f"{self.metadata['name']}-{int(self._rng.integers(2**62)):016x}"
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {"invalid": 0, "retries": 0} for a in self.agents}
        self.turns: list[Turn] = []
        self._final_turn: dict[tuple[str, str], int] = {}
        self._open_outputs: dict[str, str] = {}
        self._closed_outputs: dict[str, dict[str, str]] = {}
        self._actions: dict[str, Any] = {}
        self._attempts: dict[str, list[Turn]] = {}
        self._phase = self.setup(self._rng)
        self._queue = list(self._phase.seats)
        self.agent_selection = self._queue[0]

    def observe(self, agent: str) -> ObsT:
        return self.observe_seat(agent)

    def step(self, action: Any) -> None:
        seat = self.agent_selection
        if self.terminations[seat] or self.truncations[seat]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[seat] = 0.0
        self._clear_rewards()
        text = action if isinstance(action, str) else "" if action is None else str(action)
        turn = self._record(seat, text)
        parsed = self.parse(seat, text)
        if isinstance(parsed, Invalid):
            self._on_invalid(seat, turn, parsed)
            if turn.retried:
                self._accumulate_rewards()
                return
        else:
            turn.action = self.action_text(parsed)
        self._actions[seat] = parsed
        self._open_outputs[seat] = text
        self._queue.pop(0)
        if not self._queue:
            self._advance_phase()
        else:
            self.agent_selection = self._queue[0]
        self._accumulate_rewards()

    def render(self) -> str | None:
        lines = [f"[{t.phase}] {t.seat} ({t.role}): {t.completion!r}" for t in self.turns]
        text = "\n".join(lines)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Nothing to release: games hold no external resources."""

    # --------------------------------------------------------- for game subclasses
    @property
    def rng(self) -> np.random.Generator:
        assert self._rng is not None, "reset() first"
        return self._rng

    @property
    def phase(self) -> Phase:
        return self._phase

    def outputs(self, phase: str) -> dict[str, str]:
        """Raw completions of a CLOSED phase by seat; refuses for the open hidden phase."""
        if phase == self._phase.name and self._phase.hidden and phase not in self._closed_outputs:
            raise PermissionError(f"phase {phase!r} is still open: its outputs are hidden")
        if phase == self._phase.name and not self._phase.hidden:
            return dict(self._open_outputs)
        return dict(self._closed_outputs.get(phase, {}))

    def credit(self, seat: str, phase: str, amount: float) -> None:
        """Book ``amount`` on ``seat``'s final turn of ``phase`` and in PettingZoo's rewards."""
        self.turns[self._final_turn[(seat, phase)]].reward += float(amount)
        self.rewards[seat] += float(amount)

    def pending_seats(self) -> list[str]:
        """Seats whose next completion can be generated now, in the order they will step.

        In a hidden phase every seat that has not acted yet can be generated at
        once (nobody sees the others); otherwise only the seat to move.
        """
        if not self.agents or self.terminations[self.agent_selection]:
            return []
        return list(self._queue) if self._phase.hidden else [self._queue[0]]

    def prompt(self, seat: str) -> list[ChatMessage]:
        """The chat prompt for ``seat``'s next completion, retry feedback included."""
        messages = list(self.render_messages(self.observe_seat(seat)))
        for failed in self._attempts.get(seat, []):
            messages.append({"role": "assistant", "content": failed.completion})
            messages.append(
                {
                    "role": "user",
                    "content": f"Your reply could not be used ({failed.invalid_reason}). "
                    "Reply again, following the required format exactly.",
                }
            )
        return messages

    def episode(self) -> Episode:
        """The finished (or partial) episode as the runner/learner contract."""
        return Episode(
            episode_id=self.episode_id,
            game=self.metadata["name"],
            seed=self._seed,
            turns=[t.model_copy(deep=True) for t in self.turns],
            rewards={s: sum(t.reward for t in self.turns if t.seat == s) for s in self.possible_agents},
            roles={s: self.role(s) for s in self.possible_agents},
            metrics=self.episode_metrics(),
            info=self.episode_info(),
        )

    def annotate_last_turn(self, **fields: Any) -> Turn:
        """Attach what the policy returned (token ids, logprobs, policy name) to the newest turn."""
        turn = self.turns[-1]
        for name, value in fields.items():
            setattr(turn, name, value)
        return turn

    @property
    def done(self) -> bool:
        return not self.agents or all(self.terminations.values())

    # ------------------------------------------------------------------ internals
    def _record(self, seat: str, text: str) -> Turn:
        turn = Turn(
            index=len(self.turns),
            seat=seat,
            role=self.role(seat),
            phase=self._phase.name,
            messages=self.prompt(seat),
            completion=text,
            group=self.group_keys(seat, self._phase.name),
        )
        self.turns.append(turn)
        self._final_turn[(seat, self._phase.name)] = turn.index
        return turn

    def _on_invalid(self, seat: str, turn: Turn, invalid: Invalid) -> None:
        policy: InvalidOutputConfig = self.config.invalid  # type: ignore[attr-defined]
        turn.valid = False
        turn.invalid_reason = invalid.reason
        self.infos[seat]["invalid"] += 1
        attempts = self._attempts.setdefault(seat, [])
        if policy.mode == "retry" and len(attempts) < policy.retries:
            turn.retried = True
            attempts.append(turn)
            self.infos[seat]["retries"] += 1
            self.credit(seat, self._phase.name, policy.penalty)
            return
        if policy.mode in ("penalty", "retry"):
            self.credit(seat, self._phase.name, policy.penalty)

    def _advance_phase(self) -> None:
        closing = self._phase
        self._closed_outputs[closing.name] = dict(self._open_outputs)
        actions, self._actions = self._actions, {}
        self._open_outputs, self._attempts = {}, {}
        nxt = self.close_phase(closing, actions)
        if nxt is None:
            self.terminations = {a: True for a in self.agents}
            self._queue = []
            self.agent_selection = self.agents[0]
            return
        self._phase = nxt
        self._queue = list(nxt.seats)
        self.agent_selection = self._queue[0]
