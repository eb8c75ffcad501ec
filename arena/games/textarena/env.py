"""TextArena environments as a PettingZoo AEC game; it only wires ``bridge``; the spec is ``__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from arena.core.game import Invalid, LLMGame, Phase
from arena.core.messages import random_text
from arena.core.types import ChatMessage, Episode
from arena.games.textarena import bridge
from arena.games.textarena.bots import quoted_actions
from arena.games.textarena.types import TextArenaConfig, TextArenaObservation

TURN = "turn"


class TextArenaGame(LLMGame[TextArenaObservation, TextArenaConfig]):
    """One TextArena environment (``config.env_id``) as an arena game; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {"name": "textarena_v0", "render_modes": ["ansi", "human"],
                                          "is_parallelizable": False}
    config_type = TextArenaConfig
    observation_type = TextArenaObservation
    scripted_bots = "arena.games.textarena.bots:BOTS"
    phases = (TURN,)
    headline_metrics = ("forfeit", "draw")
    plot_panels = (("outcome", ("game/draw", "game/forfeit", "game/player_0_won")),
                   ("invalid moves", ("game/textarena_invalid",)))
    #: SPIRAL's recipe: the game's outcome on every turn of the seat (trajectory credit), and
    #: Role-conditioned Advantage Estimation with one baseline per player (SPIRAL's alpha 0.95).
    training_defaults: ClassVar[dict[str, Any]] = {
        "learner": {"estimators": {TURN: {"name": "rae", "credit": "trajectory",
                                          "options": {"order": "spiral", "alpha": 0.95}}}},
    }

    def __init__(self, config: TextArenaConfig | None = None, render_mode: str | None = None, **overrides: Any):
        super().__init__(config, render_mode, **overrides)
        declared = self.config.zero_sum
        self.zero_sum = bridge.declared_zero_sum(self.config.env_id) if declared is None else declared

    # ----------------------------------------------------------------- seats
    def seat_names(self) -> Sequence[str]:
        return [f"player_{i}" for i in range(self.config.num_players)]

    def action_examples(self, seat: str) -> Sequence[str]:
        """The actions TextArena quotes in the seat's first observation of a seed-0 game."""
        env = bridge.make_env(self.config.env_id, self.config.num_players, 0, bridge.PrivateRandom(0))
        quoted = quoted_actions(bridge.peek_observation(env, int(seat.rsplit("_", 1)[1])), last_line=False)
        return quoted or ["[0]", "[Accept]"]

    def sample_observation(self, rng: np.random.Generator) -> TextArenaObservation:
        return TextArenaObservation(env_id=self.config.env_id, player_id=int(rng.integers(self.config.num_players)),
                                    to_move=bool(rng.integers(2)), observation=random_text(rng, 200))

    # ----------------------------------------------------------------- episode
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.textarena_seed = int(rng.integers(2**31))
        self._random = bridge.PrivateRandom(self.textarena_seed)
        self._env = bridge.make_env(self.config.env_id, self.config.num_players, self.textarena_seed, self._random)
        if self.config.error_allowance is not None:
            self._env.state.error_allowance = self.config.error_allowance
        self._views: dict[int, str] = {}  # observation text per player id, for the current game state
        self._last_occurrence: dict[str, int] = {}  # each seat's latest turn occurrence (for credit)
        self._unbooked = {s: 0.0 for s in self.possible_agents}  # rewards of seats that never moved
        self._textarena_invalid = 0
        self._textarena_errors = 0  # replies on which TextArena's step raised (counted as invalid too)
        self.seat_roles = {s: s for s in self.possible_agents}
        return self._next_phase()

    def _next_phase(self) -> Phase:
        self._views = {}
        seat = f"player_{self._env.state.current_player_id}"
        # A phase is free text when TextArena takes even an empty reply as a move (talk in a
        # negotiation); elsewhere an empty reply is invalid, as the kit requires.
        free = not bridge.dry_run(self._env, "", self._random).invalid
        return Phase(TURN, (seat,), hidden=False, free_text=free)

    def observe_seat(self, seat: str) -> TextArenaObservation:
        pid = int(seat.rsplit("_", 1)[1])
        if pid not in self._views:
            self._views[pid] = bridge.peek_observation(self._env, pid)
        to_move = not self._env.state.done and self._env.state.current_player_id == pid
        return TextArenaObservation(env_id=self.config.env_id, player_id=pid, to_move=to_move,
                                    observation=self._views[pid])

    def render_messages(self, observation: TextArenaObservation) -> list[ChatMessage]:
        return [{"role": "system", "content": self.config.system_prompt},
                {"role": "user", "content": observation.observation}]

    def parse(self, seat: str, text: str) -> Any:
        """The reply itself if TextArena would take it as a move now, else Invalid with TextArena's reason."""
        if self._env.state.done or seat != self.phase.seats[0]:
            return Invalid(reason=f"it is not {seat}'s turn")
        trial = bridge.dry_run(self._env, text, self._random)
        return Invalid(reason="; ".join(trial.reasons)) if trial.invalid else text

    def action_text(self, action: Any) -> str | None:
        """The reply as TextArena took it (stripped; the first 200 characters)."""
        return None if action is None else str(action).strip()[:200]

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        """Hand the reply to TextArena, valid or not: an invalid one counts against its allowance."""
        seat = phase.seats[0]
        text = self.outputs(phase.name)[seat]
        self._env, trial = bridge.apply(self._env, text, self._random)
        self._textarena_invalid += trial.invalid
        self._textarena_errors += trial.error is not None
        self._last_occurrence[seat] = self.phase_index
        if self._env.state.done:
            self._settle()
            return None
        return self._next_phase()

    def _settle(self) -> None:
        """Book TextArena's rewards on each seat's final turn (or unbooked, for a seat that never moved)."""
        rewards = self._env.state.rewards or {}
        for pid, seat in enumerate(self.possible_agents):
            amount = float(rewards.get(pid, 0.0))
            if seat in self._last_occurrence:
                self.credit(seat, TURN, amount, occurrence=self._last_occurrence[seat])
            else:  # PettingZoo still pays it; episode() adds it to the seat's total
                self.rewards[seat] += amount
                self._unbooked[seat] += amount

    # ----------------------------------------------------------------- results
    def outcome_scores(self) -> dict[str, float]:
        booked = super().outcome_scores()
        return {s: booked[s] + self._unbooked[s] for s in self.possible_agents}

    def episode(self) -> Episode:
        ep = super().episode()
        if any(self._unbooked.values()):
            ep.rewards = {s: r + self._unbooked[s] for s, r in ep.rewards.items()}
        return ep

    def textarena_rewards(self) -> dict[str, float]:
        """TextArena's own rewards so far (empty until it ends the game)."""
        rewards = self._env.state.rewards or {}
        return {seat: float(rewards.get(pid, 0.0)) for pid, seat in enumerate(self.possible_agents)} if rewards else {}

    def episode_metrics(self) -> dict[str, float]:
        state = self._env.state
        rewards = self.textarena_rewards()
        info = getattr(state, "game_info", {}) or {}
        values = list(rewards.values())
        return {
            "textarena_invalid": float(self._textarena_invalid),
            "textarena_errors": float(self._textarena_errors),
            "forfeit": float(any(bool(v.get("invalid_move")) for v in info.values())),
            "draw": float(bool(values) and max(values) == min(values)),
            "player_0_won": float(bool(values) and rewards["player_0"] > max(values[1:], default=-np.inf)),
            "textarena_turns": float(getattr(state, "turn", 0)),
        }

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        info = (getattr(self._env.state, "game_info", {}) or {}).get(0, {})
        return {"env_id": self.config.env_id, "textarena_seed": self.textarena_seed,
                "textarena_reason": str(info.get("reason", "")) or None}


def env(**overrides: Any) -> TextArenaGame:
    """PettingZoo-style constructor."""
    return TextArenaGame(**overrides)
