"""``LLMGame``: the PettingZoo AEC base every arena game derives from.

A game writes only its rules; this class wires them into PettingZoo:

* **Actions are completion text.** ``step(text)`` hands the text to the game's
  ``parse``; any string is legal input.
* **Phases.** A game is a sequence of :class:`Phase` objects. A phase is
  *hidden* unless it says ``hidden=False``. Within a hidden phase the acting
  seats move one after another in AEC order, but nobody can read another seat's
  output until the phase closes: outputs of an open phase are only reachable
  through :meth:`LLMGame.outputs` (raw text) and :meth:`LLMGame.actions` (parsed
  values), which refuse while a hidden phase is open. Because of that, all
  pending seats of a hidden phase can be generated in one batch
  (:meth:`LLMGame.pending_seats`). ``Phase(..., sealed="episode"|"forever")``
  declares that a hidden phase's outputs stay secret after it closes too (the
  kit checks it). ``Phase(..., audience={writer: [seats]})`` declares replies
  addressed to some seats only (private offers; ``addressed=True``: each reply names
  its own), :meth:`LLMGame.draw_private` a secret drawn for one seat (a valuation)
  and :meth:`LLMGame.deal_private` a joint deal (roles, cards from one deck); the
  kit checks all three.
* **Public phases** (``hidden=False``): seats act in turn, and a later seat sees
  the earlier seats' replies only if ``observe_seat`` puts them in its
  observation: read them with ``self.outputs(phase_name)`` (raw text so far, by
  seat) or ``self.actions(phase_name)`` (parsed so far). ``close_phase`` gets the
  final parsed actions; closed occurrences stay readable through both.
* **Invalid output** (``parse`` returned :class:`Invalid`) follows the game's
  :class:`InvalidOutputConfig`: ``na`` hands the game an abstention, ``penalty``
  also credits a fixed penalty to that turn, ``retry`` asks the seat again (with
  the reason appended to its prompt) up to a budget, then behaves as
  ``penalty``. Every attempt is a :class:`~arena.core.types.Turn` and is counted in
  ``infos``.
* **Per-turn rewards.** ``credit(seat, phase, amount)`` books a reward on the
  seat's final turn of that phase occurrence, so the seat must have a turn there
  (a seat killed before it acted has none: credit its last turn). The same amounts flow into PettingZoo's
  ``rewards`` / ``_cumulative_rewards`` at the step that earned them, so the AEC
  totals and the per-turn records always agree.
* **Seeding.** Each env owns a ``numpy.random.Generator``; ``reset(seed=s)``
  replaces it, ``reset()`` continues it. Nothing touches global random state.
* **Options.** ``reset(options=...)`` is validated by the game's
  ``options_type`` and handed to :meth:`setup`, so a caller can fix roles, a
  task or a source (tournaments rotate the spy this way).
* **Repeated phases.** A phase name may recur (an agent acting 30 times); each
  occurrence keeps its own outputs and turns (``Turn.phase_index``).
* **Truncation.** ``config.max_turns`` ends an episode as a truncation, and so
  does :meth:`truncate` (the runner calls it when a prompt outgrows the model's
  context and the policy is set to end such episodes).
* **Outcomes.** :meth:`outcome` gives each seat a score and a rank (ties share
  the best rank); by default the score is the seat's total reward.
* **Shared state.** A game may declare ``state_type``, a :class:`GameState`
  that lives across episodes (a skill library, an opponent pool). One object
  serves the whole run; envs read a frozen :meth:`GameState.snapshot` bound
  with :meth:`bind_state`, so seeded replay stays exact.

The author's side (the rules API, the optional hooks and the class attributes) is
:class:`arena.core.game_hooks.GameRules`, which ``LLMGame`` extends. Subclasses implement :meth:`setup`, :meth:`observe_seat`, :meth:`render_messages`,
:meth:`parse` and :meth:`close_phase`; optionally :meth:`role` (default: the
``seat_roles`` set in ``setup``), :meth:`group_keys`, :meth:`action_examples`,
:meth:`episode_metrics`, :meth:`outcome_scores`. Class attributes declare what
the framework and configs check against: ``phases``, ``roles``,
``headline_metrics`` and ``plot_panels``.

Build order: ``__init__`` validates the config, then calls :meth:`seat_names` and
:meth:`action_examples` for every seat, **before any reset**: both may read
``self.config`` but not what :meth:`setup` sets (roles, drawn values).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from pettingzoo import AECEnv
from pydantic import BaseModel

from arena.core.game_hooks import CfgT, GameRules, ObsT
from arena.core.game_types import (
    ActionProbs, ActionQuery, GameConfig, GameState, Invalid, InvalidOutputConfig, NoOptions, Phase,
)
from arena.core.messages import CompletionSpace, MessageSpace
from arena.core.types import ChatMessage, Episode, Turn, safe_text

__all__ = [
    "ActionProbs", "ActionQuery", "GameConfig", "GameState", "Invalid", "InvalidOutputConfig", "LLMGame", "NoOptions",
    "Phase",
]

T = TypeVar("T")


class LLMGame(GameRules[ObsT, CfgT], AECEnv):
    """Base class of text games; see the module docstring for the contract. What a game writes (the rules
    and the optional hooks, with the class attributes it declares) is :class:`~arena.core.game_hooks.GameRules`;
    this class is the engine that runs them as a PettingZoo AEC environment."""

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
        self._action_spaces = {s: CompletionSpace(self._build_examples(s)) for s in self.possible_agents}
        self._observation_spaces = {
            s: MessageSpace(self.observation_type, self.sample_observation) for s in self.possible_agents
        }
        self._rng: np.random.Generator | None = None
        self._seed: int | None = None
        self.agents: list[str] = []
        self.shared: Any = None
        self.seat_roles: dict[str, str] = {}
        #: Set by the conformance kit only: (seat, generator) whose private draws are drawn again, and the
        #: generator every private deal is dealt again from.
        self.kit_redraw: tuple[str, np.random.Generator] | None = None
        self.kit_redeal: np.random.Generator | None = None
        self.private_seats: set[str] = set()
        #: Every value :meth:`deal_private` dealt this episode, by seat, in order.
        self.private_dealt: dict[str, list[Any]] = {}
        #: (move number, owner, seat) for each :meth:`reveal_private`.
        self.private_reveals: list[tuple[int, str, str]] = []

    def _build_examples(self, seat: str) -> Sequence[str]:
        try:
            return self.action_examples(seat)
        except Exception as e:  # noqa: BLE001 - re-raised with when it ran
            raise RuntimeError(
                f"{type(self).__name__}.action_examples({seat!r}) raised {type(e).__name__}: {e}. It is called while "
                "the game is being built (in __init__, before any reset), so it may read self.config but not what "
                "setup() sets; return examples that do not depend on the episode"
            ) from e

    # ------------------------------------------------------------- PettingZoo API
    def observation_space(self, agent: str) -> MessageSpace:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> CompletionSpace:
        return self._action_spaces[agent]

    @classmethod
    def validate_options(cls, options: Mapping[str, Any] | None) -> BaseModel:
        """Strict validation of reset options: an unknown key is an error (configs use this)."""
        return cls.options_type.model_validate(dict(options or {}))

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """Start an episode. ``options`` are validated by ``options_type``; a key it does not know is
        ignored with a warning, as PettingZoo expects (``api_test`` resets with ``{"options": 1}``).
        Configs validate options strictly at start-up (:meth:`validate_options`)."""
        parsed = self.options_type.model_validate(self._known_options(options or {}))
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        elif self._rng is None:
            self._rng = np.random.default_rng()
        self._seed = seed
        self._options = parsed.model_dump(mode="json", exclude_defaults=True)
        self.episode_id = f"{self.metadata['name']}-{int(self._rng.integers(2**62)):016x}"
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {"invalid": 0, "retries": 0} for a in self.agents}
        self.turns: list[Turn] = []
        self._final_turn: dict[tuple[str, str, int], int] = {}
        self._open_outputs: dict[str, str] = {}
        self._closed_outputs: dict[tuple[str, int], dict[str, str]] = {}
        self._closed_actions: dict[tuple[str, int], dict[str, Any]] = {}
        self._occurrences: dict[str, int] = {}
        self._actions: dict[str, Any] = {}
        self._attempts: dict[str, list[Turn]] = {}
        self._prompts: dict[str, list[ChatMessage]] = {}
        self._last_seen: dict[str, Any] = {}
        self._truncation: str | None = None
        self.seat_roles = {}
        self.private_seats = set()
        self.private_dealt = {}
        self.private_reveals = []
        self._audiences: dict[tuple[str, int, str], tuple[str, ...]] = {}
        self._enter(self.setup(self._rng, parsed))

    def _known_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        if self.options_type.model_config.get("extra") != "forbid":
            return dict(options)
        fields = self.options_type.model_fields
        known = set(fields) | {f.alias for f in fields.values() if f.alias}
        unknown = sorted(str(k) for k in options if k not in known)
        if unknown:
            warnings.warn(
                f"{self.metadata['name']}: reset ignores unknown option(s) {', '.join(unknown)}; "
                f"{self.options_type.__name__} knows: {', '.join(sorted(fields)) or 'none'}",
                UserWarning, stacklevel=3,
            )
        return {k: v for k, v in options.items() if k in known}

    def observe(self, agent: str) -> ObsT:
        """The seat's observation; once the episode is over, the last one it got while it ran.

        So a game's ``observe_seat`` never has to describe a finished game (PettingZoo
        still asks every seat for an observation during the final dead steps).
        """
        if self.done and agent in self._last_seen:
            return self._last_seen[agent]
        observation = self.observe_seat(agent)
        if not self.done:
            self._last_seen[agent] = observation
        return observation

    def step(self, action: Any) -> None:
        seat = self.agent_selection
        if self.terminations[seat] or self.truncations[seat]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[seat] = 0.0
        self._clear_rewards()
        text = safe_text(action if isinstance(action, str) else "" if action is None else str(action))
        turn = self._record(seat, text)
        self._prompts.clear()
        parsed = self.parse(seat, text)
        audience = self._phase.audience
        if self._phase.addressed or audience is not None:  # who may see this reply, for the kit and the game
            seen_by = self.reply_audience(seat, parsed) if audience is None else audience.get(seat, ())
            self._audiences[(self._phase.name, self.phase_index, seat)] = tuple(seen_by)
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
        limit = getattr(self.config, "max_turns", None)
        if limit is not None and not self.done and len(self.turns) >= limit:
            self.truncate(f"step limit of {limit} turns")
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
        if self._rng is None:
            raise RuntimeError("reset() the game before using its random generator")
        return self._rng

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def phase_index(self) -> int:
        """Occurrence number of the open phase (0 the first time its name opens)."""
        return self._occurrences[self._phase.name] - 1

    @property
    def options(self) -> dict[str, Any]:
        """The options this episode was reset with (non-default fields, as JSON)."""
        return dict(self._options)

    def draw_private(self, seat: str, rng: np.random.Generator, draw: Callable[[np.random.Generator], T]) -> T:
        """A secret drawn for ``seat`` alone (a valuation, a hand): returns ``draw(rng)``.

        Declaring the draw this way lets the conformance kit replay the game with this
        seat's secret drawn again (the same seed otherwise: ``draw(rng)`` always runs,
        so ``rng`` moves as it would) and require that no other seat's view changes.
        ``draw`` uses only the generator it is given. Call it from ``setup`` or later
        (a new valuation each round); ``private_seats`` lists the seats that drew.
        """
        value = draw(rng)
        self.private_seats.add(seat)
        if self.kit_redraw is not None and self.kit_redraw[0] == seat:
            return draw(self.kit_redraw[1])
        return value

    def deal_private(self, seats: Sequence[str], rng: np.random.Generator,
                     deal: Callable[[np.random.Generator], Sequence[T]]) -> dict[str, T]:
        """A joint secret deal (roles, cards from one deck): ``deal(rng)`` gives one value per seat of
        ``seats``, in order, each seen by its own seat only; returns seat -> value.

        As with :meth:`draw_private`, ``deal(rng)`` always runs (``rng`` moves as it would) and the kit may
        replace its result by a deal from another generator: a seat whose value comes out the same then
        sees nothing change. The values are kept in ``private_dealt``."""
        values = list(deal(rng))
        if self.kit_redeal is not None:
            values = list(deal(self.kit_redeal))
        if len(values) != len(seats):
            raise ValueError(f"deal_private: the deal gave {len(values)} values for {len(seats)} seats")
        for seat, value in zip(seats, values):
            self.private_dealt.setdefault(seat, []).append(value)
        return dict(zip(seats, values))

    def reveal_private(self, owner: str, to: str) -> None:
        """Declare that ``to`` is shown ``owner``'s private value (drawn or dealt) from now on, by the rules (the
        seer's vision, fellow werewolves): the kit then lets what ``to`` sees depend on it from this move on."""
        self.private_reveals.append((len(self.turns), owner, to))

    def reply_seen_by(self, phase: str, occurrence: int, seat: str) -> tuple[str, ...] | None:
        """Who besides ``seat`` may see the reply it wrote in that phase occurrence: the phase's ``audience``
        entry, or what :meth:`reply_audience` named in an ``addressed`` phase; None where the phase declares
        neither or the seat has not written yet."""
        return self._audiences.get((phase, occurrence, seat))

    def outputs(self, phase: str, occurrence: int | None = None) -> dict[str, str]:
        """Raw completions of a CLOSED phase occurrence (default: the latest) by seat.

        Refuses for the open occurrence of a hidden phase; the open occurrence of a
        public phase returns what has been written so far.
        """
        latest = self._occurrences.get(phase, 0) - 1
        index = latest if occurrence is None else occurrence
        if (phase, index) in self._closed_outputs:  # closed (also while close_phase runs)
            return dict(self._closed_outputs[(phase, index)])
        is_open = not self.done and phase == self._phase.name and index == self.phase_index
        if is_open and self._phase.hidden:
            raise PermissionError(f"phase {phase!r} is still open: its outputs are hidden")
        if is_open:
            return dict(self._open_outputs)
        return dict(self._closed_outputs.get((phase, index), {}))

    def actions(self, phase: str, occurrence: int | None = None) -> dict[str, Any]:
        """Parsed actions (``Invalid`` for abstentions) of a phase occurrence, by seat; the
        same rules as :meth:`outputs`: refuses for the open occurrence of a hidden phase."""
        latest = self._occurrences.get(phase, 0) - 1
        index = latest if occurrence is None else occurrence
        if (phase, index) in self._closed_actions:
            return dict(self._closed_actions[(phase, index)])
        is_open = not self.done and phase == self._phase.name and index == self.phase_index
        if is_open and self._phase.hidden:
            raise PermissionError(f"phase {phase!r} is still open: its actions are hidden")
        return dict(self._actions) if is_open else {}

    def credit(self, seat: str, phase: str, amount: float, occurrence: int | None = None) -> None:
        """Book ``amount`` on ``seat``'s final turn of ``phase`` (default: its latest occurrence)."""
        index = self._occurrences.get(phase, 0) - 1 if occurrence is None else occurrence
        key = (seat, phase, index)
        if key not in self._final_turn:
            at = f"occurrence {index}" + (": it has not opened yet" if index < 0 else "")
            raise KeyError(f"credit: {seat} has no turn in phase {phase!r} ({at}); a reward is booked "
                           "on a turn the seat took in that phase occurrence: credit a phase it acted in (its last "
                           "turn is the last of self.turns with that seat) or pass occurrence=")
        self.turns[self._final_turn[key]].reward += float(amount)
        self.rewards[seat] += float(amount)

    def credit_phase(self, phase: str, amounts: Mapping[str, float]) -> None:
        """Credit a whole phase at once: ``amounts`` maps seats to rewards."""
        for seat, amount in amounts.items():
            self.credit(seat, phase, amount)

    def truncate(self, reason: str) -> None:
        """End the episode now as a truncation (no further turns; rewards so far stand)."""
        if self.done:
            return
        self._truncation = reason
        self.truncations = {a: True for a in self.agents}
        self._queue = []
        self.agent_selection = self.agents[0]

    def pending_seats(self) -> list[str]:
        """Seats whose next completion can be generated now, in the order they will step.

        In a hidden phase every seat that has not acted yet can be generated at
        once (nobody sees the others); otherwise only the seat to move.
        """
        if self.done:
            return []
        return list(self._queue) if self._phase.hidden else [self._queue[0]]

    def prompt(self, seat: str) -> list[ChatMessage]:
        """The chat prompt for ``seat``'s next completion, retry feedback included.

        Rendered once per game state: the runner's request and the recorded turn
        share it (the cache is cleared by every step).
        """
        if seat not in self._prompts:
            self._prompts[seat] = self._render_prompt(seat)
        return list(self._prompts[seat])

    def _render_prompt(self, seat: str) -> list[ChatMessage]:
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
            info=self.episode_info() | ({"truncation": self._truncation} if self._truncation else {}),
            outcome=self.outcome() if self.done and self._truncation is None else {},
            truncated=self._truncation is not None,
            options=self.options,
        )

    def annotate_last_turn(self, **fields: Any) -> Turn:
        """Attach what the policy returned (token ids, logprobs, policy name) to the newest turn."""
        turn = self.turns[-1]
        for name, value in fields.items():
            setattr(turn, name, value)
        return turn

    @property
    def done(self) -> bool:
        return not self.agents or all(t or u for t, u in zip(self.terminations.values(), self.truncations.values()))

    # ------------------------------------------------------------------ internals
    def _record(self, seat: str, text: str) -> Turn:
        turn = Turn(
            index=len(self.turns),
            seat=seat,
            role=self.role(seat),
            phase=self._phase.name,
            phase_index=self.phase_index,
            messages=self.prompt(seat),
            completion=text,
            group=self.group_keys(seat, self._phase.name),
            probes=self.probe_prompts(seat),
        )
        self.turns.append(turn)
        self._final_turn[(seat, self._phase.name, self.phase_index)] = turn.index
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

    def _enter(self, phase: Phase) -> None:
        if not phase.seats:
            raise ValueError(f"phase {phase.name!r} has no seats")
        self._phase = phase
        self._occurrences[phase.name] = self._occurrences.get(phase.name, 0) + 1
        self._queue = list(phase.seats)
        self.agent_selection = self._queue[0]

    def _advance_phase(self) -> None:
        closing = self._phase
        self._closed_outputs[(closing.name, self.phase_index)] = dict(self._open_outputs)
        actions, self._actions = self._actions, {}
        self._closed_actions[(closing.name, self.phase_index)] = dict(actions)
        self._open_outputs, self._attempts = {}, {}
        nxt = self.close_phase(closing, actions)
        if nxt is None:
            self.terminations = {a: True for a in self.agents}
            self._queue = []
            self.agent_selection = self.agents[0]
            return
        self._enter(nxt)
