"""LSP as a PettingZoo AEC environment: it only wires the rules; the spec is ``arena/games/lsp/__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from arena.core.game import Invalid, LLMGame, NoOptions, Phase
from arena.core.types import ChatMessage, Episode
from arena.games.lsp import prompts
from arena.games.lsp.rules import (
    arithmetic_reward,
    arithmetic_target,
    challenger_reward,
    code_share,
    distinct_n,
    extract_query,
    mean,
    parse_reward,
    parse_score,
    solver_rewards,
    words,
)
from arena.games.lsp.types import LspConfig, LspObservation


class Verdict(BaseModel):
    """A referee seat's parsed reply: ``value`` None when unparseable."""

    kind: str
    value: float | None

    def __str__(self) -> str:
        return "unparseable" if self.value is None else f"{self.value:g}"


class LspGame(LLMGame[LspObservation, LspConfig]):
    """LSP (challenger -> G solvers -> referee) as a PettingZoo AEC environment; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {"name": "lsp_v0", "render_modes": ["ansi", "human"], "is_parallelizable": False}
    config_type = LspConfig
    options_type = NoOptions
    scripted_bots = "arena.games.lsp.bots:BOTS"
    observation_type = LspObservation
    phases = ("challenge", "solve", "referee")
    roles = ("challenger", "solver", "reward", "judge")
    headline_metrics = ("R", "R_Q", "no_query")
    plot_panels = (
        ("task reward R and V(q)", ("game/R", "game/V_spread", "game/rm_unparseable_rate")),
        ("self-reward R_Q", ("game/R_Q", "game/judge_unparseable_rate")),
        ("reward per role", ("reward/challenger", "reward/solver")),
        ("reward hacking", ("game/code_answer_share", "game/no_query", "game/query_distinct_n")),
        ("length (words)", ("game/answer_words", "game/query_words")),
    )
    training_defaults: ClassVar[dict[str, Any]] = {
        "learner": {
            "loss": "reinforce",
            "beta": 0.05,
            "kl_estimator": "k1",
            "lr": 3e-6,  # the paper's (the learner's own default, 1e-6, is SpyRL's)
            "aggregate_per_phase": True,  # L = L_sol + alpha_ch * L_ch, each role's own token mean
            "drop_zero_variance": False,  # the paper's loss has every sample (and its KL term)
            "estimators": {
                "challenge": {"name": "lsp_challenger", "group_by": ["phase"]},
                "solve": {"name": "lsp_solver", "group_by": ["episode"]},
            },
        },
        "train": {"games_per_step": 8},  # the paper's 8 queries per step (the global default 128 is SpyRL's)
    }

    # ----------------------------------------------------------------- seats
    @property
    def solvers(self) -> list[str]:
        return [f"solver_{j}" for j in range(self.config.n_solvers)]

    @property
    def referees(self) -> list[str]:
        cfg, g = self.config, range(self.config.n_solvers)
        seats = [f"reward_{j}" for j in g] if cfg.task_reward == "reward_model" else []
        return seats + ([f"judge_{j}" for j in g] if cfg.mode == "lsp" else [])

    def seat_names(self) -> Sequence[str]:
        return ["challenger_0", *self.solvers, *self.referees]

    def role(self, seat: str) -> str:
        return seat.rsplit("_", 1)[0]

    @staticmethod
    def _index(seat: str) -> int:
        return int(seat.rsplit("_", 1)[1])

    # ----------------------------------------------------------------- episode
    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.query: str | None = None
        self.no_query_reason: str | None = None
        self.target: int | None = None
        self.answers: dict[int, str] = {}
        self.r: dict[int, float] = {}
        self.r_q: dict[int, float] = {}
        self.unparseable = {"reward": 0, "judge": 0}
        return Phase("challenge", ("challenger_0",))

    def observe_seat(self, seat: str) -> LspObservation:
        role = self.role(seat)
        cfg = self.config
        answer = self.answers.get(self._index(seat), "") if role in ("reward", "judge") else ""
        return LspObservation(
            phase=self.phase.name if not self.done else "done",  # type: ignore[arg-type]
            role=role,  # type: ignore[arg-type]
            seat_index=self._index(seat),
            task=cfg.task if role == "challenger" else "",
            template=cfg.template if role == "challenger" else "",
            query=(self.query or "") if role != "challenger" else "",
            answer=answer,
        )

    def render_messages(self, observation: LspObservation) -> list[ChatMessage]:
        cfg = self.config
        return prompts.render(observation, cfg.challenger_prefix, cfg.judge_prefix)

    def parse(self, seat: str, text: str) -> Any:
        cfg = self.config
        phase = self.phase.name
        if phase == "challenge":
            query = extract_query(cfg.challenger_prefix + text, cfg.query_format, cfg.max_query_chars)
            if isinstance(query, Invalid) or cfg.task_reward != "verifier":
                return query
            target = arithmetic_target(query)
            return target if isinstance(target, Invalid) else (query, target)
        if phase == "solve":
            return text
        role = self.role(seat)
        value = parse_reward(text) if role == "reward" else parse_score(cfg.judge_prefix + text)
        return Verdict(kind=role, value=value)

    def action_text(self, action: Any) -> str | None:
        return action[0] if isinstance(action, tuple) else str(action)

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        cfg = self.config
        if phase.name == "challenge":
            action = actions["challenger_0"]
            if isinstance(action, Invalid):
                self.no_query_reason = action.reason
                return None
            self.query, self.target = action if isinstance(action, tuple) else (action, None)
            return Phase("solve", tuple(self.solvers), free_text=True)  # any text is an answer
        if phase.name == "solve":
            self.answers = {self._index(s): a for s, a in actions.items()}
            if cfg.task_reward == "verifier" and self.target is not None:
                self.r = {j: arithmetic_reward(self.target, a, cfg.final_answer) for j, a in self.answers.items()}
            if cfg.referee_seats:
                # free_text: an unparseable verdict is scored (unparseable_reward/score), by design never invalid
                return Phase("referee", tuple(self.referees), free_text=True)
            self._book_rewards()
            return None
        for seat, verdict in actions.items():
            j, value = self._index(seat), verdict.value
            if value is None:
                self.unparseable[verdict.kind] += 1
            if verdict.kind == "reward":
                self.r[j] = cfg.unparseable_reward if value is None else value
            else:
                self.r_q[j] = float(cfg.unparseable_score if value is None else value)
        self._book_rewards()
        return None

    def _book_rewards(self) -> None:
        g = range(self.config.n_solvers)
        r = [self.r[j] for j in g]
        r_q = [self.r_q[j] for j in g] if self.config.mode == "lsp" else None
        for j, reward in enumerate(solver_rewards(r, r_q)):
            self.credit(f"solver_{j}", "solve", reward)
        self.credit("challenger_0", "challenge", challenger_reward(r, r_q))

    # ----------------------------------------------------------------- extras
    def group_keys(self, seat: str, phase: str) -> dict[str, str]:
        return {"episode": self.episode_id, "phase": phase, "role": self.role(seat)}

    def action_examples(self, seat: str) -> Sequence[str]:
        role = self.role(seat)
        if role == "challenger":
            return [f"[Start Generation]\nWhat is {a} + {b}?\n[End Generation]" for a, b in ((12, 30), (7, 8))]
        if role == "solver":
            return ["The answer is 42.", "```python\nprint(42)\n```"]
        if role == "reward":
            return ["0.5", "-1.25"]
        return ["Clear. <Calculation>1+1+1+1+0+1+1=6</Calculation>\n<Score>6</Score>", "<Score>0"]

    def sample_observation(self, rng: np.random.Generator) -> LspObservation:
        role = ("challenger", "solver", "reward", "judge")[int(rng.integers(4))]
        return LspObservation(
            phase=("challenge", "solve", "referee", "done")[int(rng.integers(4))],  # type: ignore[arg-type]
            role=role,  # type: ignore[arg-type]
            seat_index=int(rng.integers(8)),
            task="arithmetic" if role == "challenger" else "",
            query=f"What is {int(rng.integers(100))} + 1?" if role != "challenger" else "",
            answer=f"{int(rng.integers(100))}" if role in ("reward", "judge") else "",
        )

    def episode_metrics(self) -> dict[str, float]:
        """Per game: no_query; and once answered, R (= V(q)), R_Q (= V_Q(q)), the code share of
        answers, answer and query length in words, unparseable referee rates."""
        if self.query is None:
            return {"no_query": 1.0} if self.done else {}
        metrics = {"no_query": 0.0, "query_words": float(words(self.query))}
        if self.answers:
            answers = list(self.answers.values())
            metrics["answer_words"] = mean([words(a) for a in answers])
            metrics["code_answer_share"] = mean([code_share(a) > self.config.code_threshold for a in answers])
        if len(self.r) == self.config.n_solvers:
            metrics["R"] = mean(list(self.r.values()))
        if self.config.mode == "lsp" and self.r_q:
            metrics["R_Q"] = mean(list(self.r_q.values()))
            metrics["judge_unparseable_rate"] = self.unparseable["judge"] / self.config.n_solvers
        if self.config.task_reward == "reward_model" and self.r:
            metrics["rm_unparseable_rate"] = self.unparseable["reward"] / self.config.n_solvers
        return metrics

    def step_metrics(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Across a step's games: distinct-n of the queries and the spread (std) of V(q)."""
        queries = [ep.info["query"] for ep in episodes if isinstance(ep.info.get("query"), str)]
        values = [ep.metrics["R"] for ep in episodes if "R" in ep.metrics]
        out = {"query_distinct_n": distinct_n(queries, self.config.ngram)} if queries else {}
        if values:
            out["V_spread"] = float(np.std(values))
        return out

    def outcome_scores(self) -> dict[str, float]:
        """Each seat's total reward; referee seats score 0."""
        return {s: sum(t.reward for t in self.turns if t.seat == s) for s in self.possible_agents}

    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        info: dict[str, str | int | float | bool | None] = {"query": self.query, "mode": self.config.mode}
        if self.no_query_reason:
            info["no_query_reason"] = self.no_query_reason
        if self.target is not None:
            info["target"] = self.target
        return info


def env(**kwargs: Any) -> LspGame:
    """PettingZoo-style constructor: ``env(mode="lsp_zero", n_solvers=4)``."""
    return LspGame(**kwargs)
