"""OpenSpiel games as a PettingZoo AEC environment: it only wires the rules; the spec is ``arena/games/openspiel/__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from arena.core.game import Invalid, LLMGame, Phase
from arena.core.game_types import ActionProbs
from arena.core.types import ChatMessage
from arena.games.openspiel import rules
from arena.games.openspiel.tree import exact_tree
from arena.games.openspiel.types import OpenSpielConfig, OpenSpielObservation
from arena.games.openspiel.view import observe, render  # noqa: F401 - the env's own, re-exported

MOVE = "move"


class OpenSpielGame(LLMGame[OpenSpielObservation, OpenSpielConfig]):
    """Any sequential OpenSpiel game with explicit chance; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {"name": "openspiel_v0", "render_modes": ["ansi", "human"],
                                          "is_parallelizable": False}
    config_type = OpenSpielConfig
    observation_type = OpenSpielObservation
    scripted_bots = "arena.games.openspiel.bots:BOTS"
    phases = (MOVE,)
    observations_recur = True  # information states (a card, a betting history) recur across deals
    headline_metrics = ("invalid_rate",)
    plot_panels = (("returns", ("reward/player_0", "reward/player_1")),
                   ("exploitability", ("eval/exploitability/exploitability",)))
    training_defaults: ClassVar[dict[str, Any]] = {
        "learner": {"estimators": {MOVE: {"name": "rae", "credit": "trajectory", "options": {"order": "spiral"}}}},
    }

    def __init__(self, config: OpenSpielConfig | None = None, render_mode: str | None = None, **overrides: Any):
        super().__init__(config, render_mode, **overrides)
        self.game = self.config.load()
        self.zero_sum = rules.is_zero_sum(self.game)  # the declared utility, per configured game

    # ----------------------------------------------------------------- seats
    def seat_names(self) -> Sequence[str]:
        return [f"player_{p}" for p in range(self.config.load().num_players())]

    def role(self, seat: str) -> str:
        return seat  # one role per OpenSpiel player: RAE keeps one baseline per player, as SPIRAL does

    def action_examples(self, seat: str) -> Sequence[str]:
        state = self.config.load().new_initial_state()
        rules.resolve_chance(state, np.random.default_rng(0))
        if state.is_terminal():
            return ["pass"]
        names = rules.legal_names(state, state.current_player())
        return [names[0], f"I choose {names[-1]}", names[-1].upper()]

    # ----------------------------------------------------------------- episode
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.os_state = self.game.new_initial_state()
        self.moves: list[tuple[int, str]] = []
        self.last_turn: dict[str, int] = {}
        self.invalid_moves = 0
        return self._next_phase()

    def _next_phase(self) -> Phase | None:
        rules.resolve_chance(self.os_state, self.rng)
        if self.os_state.is_terminal():
            return None
        return Phase(MOVE, (f"player_{self.os_state.current_player()}",), hidden=False)

    def observe_seat(self, seat: str) -> OpenSpielObservation:
        return observe(self.config.game, self.os_state, int(seat.rsplit("_", 1)[1]), self.config.view)

    def action_choices(self, seat: str) -> list[str] | None:
        """``action_mode: score``: the legal action names of the seat to move (each parses as itself)."""
        if self.config.action_mode != "score":
            return None
        player = int(seat.rsplit("_", 1)[1])
        if self.os_state.is_terminal() or self.os_state.current_player() != player:
            return None
        return rules.legal_names(self.os_state, player)

    def uses_choices(self) -> bool:
        return self.config.action_mode == "score"

    def render_messages(self, observation: OpenSpielObservation) -> list[ChatMessage]:
        return render(observation)

    def parse(self, seat: str, text: str) -> Any:
        player = int(seat.rsplit("_", 1)[1])
        if self.os_state.is_terminal() or self.os_state.current_player() != player:
            return Invalid(reason="not this seat's turn")
        return rules.parse_action(text, rules.legal_names(self.os_state, player))

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        (seat,) = phase.seats
        player = int(seat.rsplit("_", 1)[1])
        legal = self.os_state.legal_actions(player)
        choice = actions.get(seat)
        if isinstance(choice, Invalid) or choice is None:  # an abstention: a uniformly random legal action
            self.invalid_moves += 1
            choice = int(self.rng.integers(len(legal)))
        action = legal[choice]
        self.moves.append((player, self.os_state.action_to_string(player, action)))
        self.os_state.apply_action(action)
        self.last_turn[seat] = self.phase_index
        nxt = self._next_phase()
        if nxt is None:
            for s, value in zip(self.possible_agents, self.os_state.returns(), strict=True):
                if s in self.last_turn:
                    self.credit(s, MOVE, float(value), occurrence=self.last_turn[s])
        return nxt

    # ----------------------------------------------------------------- results
    def outcome_scores(self) -> dict[str, float]:
        """OpenSpiel's returns (a seat that never moved has no turn to book them on, but still scores them)."""
        if not self.os_state.is_terminal():
            return super().outcome_scores()
        return {s: float(v) for s, v in zip(self.possible_agents, self.os_state.returns(), strict=True)}

    def episode_metrics(self) -> dict[str, float]:
        moves = max(1, len(self.moves))
        return {"invalid_rate": self.invalid_moves / moves, "moves": float(len(self.moves))}

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        return {"openspiel_game": str(self.game), "history": " ".join(f"{p}:{a}" for p, a in self.moves)}

    def exact_tree(self) -> Any:
        """The capability of arena.exact (an ``ExactGame``): this configured game's tree and queries."""
        return exact_tree(self.config)

    def policy_metrics(self, action_probs: ActionProbs) -> dict[str, float]:
        """Exact NashConv and exploitability of the seats' policies (arena/exact/played.py)."""
        from arena.exact.played import policy_exploitability

        return policy_exploitability(self.exact_tree(), action_probs)

    def played_array(self, action_probs: ActionProbs) -> Any:
        """The played policy's table (``arena.exact.played.played_table``) as an array: one row per information state."""
        from arena.exact.played import played_table

        return played_table(self.exact_tree(), action_probs).action_probability_array.copy()

    def average_metrics(self, played: Any) -> dict[str, float]:
        """Exploitability of the average of several :meth:`played_array` tables (arena/exact/average.py)."""
        from arena.exact.average import average_metrics

        return average_metrics(self.exact_tree(), played)



def env(**kwargs: Any) -> OpenSpielGame:
    """PettingZoo-style constructor: ``env(game="leduc_poker")``."""
    return OpenSpielGame(**kwargs)
