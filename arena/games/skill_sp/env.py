"""Skill-SP as a PettingZoo AEC environment and its cross-episode state; the spec is ``arena/games/skill_sp/__init__.py``."""

from __future__ import annotations

import json
import threading
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from arena.core.game import GameState, Invalid, LLMGame, Phase
from arena.core.game_types import TextGenerator
from arena.core.types import ChatMessage, Episode, safe_text
from arena.games.skill_sp import prompts
from arena.games.skill_sp.controller import Outcome, SkillLibrary, task_shape
from arena.games.skill_sp.evolve import evolve
from arena.games.skill_sp.heldout import heldout_tasks, validators_for
from arena.games.skill_sp.loader import SKILLS_DIR, TOOLS_SOURCE, SkillPackage, load_library
from arena.games.skill_sp.rules import Proposal, ProbeVerdict, parse_answer, parse_proposal, probe_verdict, proposal_reward
from arena.games.skill_sp.sandbox import Job, Limits, Sandbox, SandboxPool, SandboxResult
from arena.games.skill_sp.types import SkillSpConfig, SkillSpObservation, SkillSpOptions

HERE = Path(__file__).parent
JUDGE_SOURCE = (HERE / "judge.py").read_text()
EXPLORATION_VALIDATORS = (HERE / "exploration_validators.py").read_text()

_POOLS: dict[tuple[Limits, int], SandboxPool] = {}
_POOLS_LOCK = threading.Lock()
CACHE_SIZE = 4096  # remembered sandbox results: seed validators and checkers are deterministic


def shared_pool(limits: Limits, workers: int) -> SandboxPool:
    """One sandbox pool per (limits, workers) in a process, shared by every env (started on first use)."""
    with _POOLS_LOCK:
        if (limits, workers) not in _POOLS:
            _POOLS[(limits, workers)] = SandboxPool(Sandbox(limits), workers, cache_size=CACHE_SIZE)
        return _POOLS[(limits, workers)]


@dataclass(frozen=True)
class LibraryView:
    """The frozen snapshot envs read: active skills, their routing weights and packages."""

    names: tuple[str, ...]
    weights: tuple[float, ...]
    packages: Mapping[str, SkillPackage]

    @classmethod
    def of(cls, library: SkillLibrary) -> LibraryView:
        w = library.weights()
        names = tuple(w)
        return cls(names, tuple(w[n] for n in names), types.MappingProxyType({n: library.packages[n] for n in names}))


class SkillState(GameState):
    """The skill library across episodes: routing snapshot, statistics update, pruning, checkpoints."""

    def __init__(self, config: SkillSpConfig) -> None:
        root = Path(config.skills_dir) if config.skills_dir else SKILLS_DIR
        self.config = config
        self.library = SkillLibrary(load_library(root).values(), config.controller)
        shared_pool(config.sandbox, config.sandbox_workers)  # a machine without a working sandbox fails at start-up

    def snapshot(self) -> LibraryView:
        return LibraryView.of(self.library)

    def update(self, episodes: Sequence[Episode], policies: Mapping[str, TextGenerator]) -> dict[str, float]:
        """Fold each skill-stream episode into its skill's stats, count co-occurrence, prune."""
        routed: list[str] = []
        valid: dict[str, list[float]] = {}
        for ep in episodes:
            skill = ep.info.get("skill")
            if ep.info.get("stream") != "skill" or not isinstance(skill, str) or skill not in self.library.stats:
                continue
            outcome = Outcome(
                parsed=bool(ep.info.get("parsed")),
                structurally_verified=bool(ep.info.get("verified")),
                solver_consistent=bool(ep.info.get("consistent")),
                v_solve=float(ep.info.get("v_solve") or 0.0),
                shape=str(ep.info.get("shape") or ""),
            )
            self.library.record(skill, outcome)
            routed.append(skill)
            valid.setdefault(skill, []).append(float(outcome.valid))
        self.library.co_occur(routed)
        evolved = self._evolve(episodes, policies)
        pruned = self.library.prune()
        self.library.next_iteration()
        metrics: dict[str, float] = {"library_size": float(len(self.library.active())), "pruned": float(len(pruned))}
        metrics |= evolved
        kinds = [k for _, _, k in self.library.graph.edges(keys=True)]
        metrics |= {f"graph/{k}": float(kinds.count(k)) for k in ("induced_from", "refined_from", "co_occurs")}
        for name, w in self.library.weights().items():
            metrics[f"weight/{name}"] = w
        for name, flags in valid.items():
            metrics[f"validity/{name}"] = sum(flags) / len(flags)
        return metrics

    def _evolve(self, episodes: Sequence[Episode], policies: Mapping[str, TextGenerator]) -> dict[str, float]:
        cfg = self.config.evolution
        if cfg.policy is None:
            return {}
        if cfg.policy not in policies:
            raise ValueError(f"game.evolution.policy: no policy {cfg.policy!r}; known: {', '.join(sorted(policies))}")
        pool = shared_pool(self.config.sandbox, self.config.sandbox_workers)
        return evolve(self.library, episodes, policies[cfg.policy], pool, cfg, seed=self.library.iteration * 7919)

    def save(self, folder: Path) -> None:
        self.library.save(folder)

    def load(self, folder: Path) -> None:
        self.library = SkillLibrary.load(folder)


_DEFAULT_VIEWS: dict[str | None, LibraryView] = {}


class SkillSpGame(LLMGame[SkillSpObservation, SkillSpConfig]):
    """Skill-SP as a PettingZoo AEC environment; see the package docstring."""

    metadata: ClassVar[dict[str, Any]] = {"name": "skill_sp_v1", "render_modes": ["ansi", "human"]}
    config_type = SkillSpConfig
    options_type = SkillSpOptions
    observation_type = SkillSpObservation
    scripted_bots = "arena.games.skill_sp.bots:BOTS"
    state_type = SkillState
    phases = ("propose", "probe", "solve")
    roles = ("proposer", "probe", "solver")
    headline_metrics = ("valid", "v_solve", "solver_accuracy")
    plot_panels = (
        ("reward per role", ("reward/proposer", "reward/solver")),
        ("tasks", ("game/parsed", "game/verified", "game/valid", "game/v_solve", "game/solver_accuracy")),
        ("library", ("state/library_size", "state/induced", "state/refined", "state/pruned")),
    )
    training_defaults: ClassVar[dict[str, Any]] = {
        "learner": {
            "estimators": {
                "propose": {"name": "grpo", "group_by": ["phase", "role"]},
                "solve": {"name": "skill_sp_curriculum", "group_by": ["episode", "phase"], "options": {"tasks": 8}},
            }
        }
    }

    # ----------------------------------------------------------------- seats
    @property
    def probe_seats(self) -> tuple[str, ...]:
        return tuple(f"probe_{i}" for i in range(self.config.probes))

    @property
    def solver_seats(self) -> tuple[str, ...]:
        return tuple(f"solver_{i}" for i in range(self.config.solvers))

    def seat_names(self) -> Sequence[str]:
        return ["proposer", *self.probe_seats, *self.solver_seats]

    def role(self, seat: str) -> str:
        return "proposer" if seat == "proposer" else seat.split("_")[0]

    # ----------------------------------------------------------------- episode
    def _view(self) -> LibraryView:
        if isinstance(self.shared, LibraryView):
            return self.shared
        key = self.config.skills_dir
        if key not in _DEFAULT_VIEWS:  # no run state bound (tests, play): a fresh library
            _DEFAULT_VIEWS[key] = SkillState(self.config).snapshot()
        return _DEFAULT_VIEWS[key]

    def setup(self, rng: np.random.Generator, options: SkillSpOptions) -> Phase:
        self.skill: SkillPackage | None = None
        self.verified = False
        self.verdict: ProbeVerdict | None = None
        self.reason = ""
        self.solved: list[bool] = []
        self.heldout = self.config.mode == "heldout"
        if self.heldout:  # evaluation: a held-out task goes straight to the solvers
            tasks = heldout_tasks(self.config.heldout_source, self.config.heldout_path)
            row = tasks[options.task % len(tasks) if options.task is not None else int(rng.integers(len(tasks)))]
            self.heldout_skill = row["skill"]
            self.validators = validators_for(row["skill"])
            self.example_index = 0
            self.proposal = Proposal(row["task"], row["contract"])
            self.verified = True
            return Phase("solve", self.solver_seats)
        view = self._view()
        if options.skill is not None:
            if options.skill not in view.packages:
                raise ValueError(f"unknown or inactive skill {options.skill!r}; active: {', '.join(view.names)}")
            self.skill = view.packages[options.skill]
        elif options.stream != "exploration" and view.names:
            explore = rng.random() < self.config.exploration_share
            if options.stream == "skill" or not explore:
                p = np.asarray(view.weights) / sum(view.weights)
                self.skill = view.packages[view.names[int(rng.choice(len(view.names), p=p))]]
        self.example_index = int(rng.integers(len(self.skill.examples))) if self.skill is not None else 0
        self.validators = self.skill.validators if self.skill is not None else EXPLORATION_VALIDATORS
        self.proposal: Proposal | None = None
        return Phase("propose", ("proposer",))

    def observe_seat(self, seat: str) -> SkillSpObservation:
        if seat == "proposer":
            if self.skill is None:
                return SkillSpObservation(role="proposer")
            ex = self.skill.examples[self.example_index % len(self.skill.examples)]
            return SkillSpObservation(
                role="proposer", skill=self.skill.name, description=self.skill.description, rules=self.skill.rules,
                hints=self.skill.hints, example_task=ex.prompt, example_contract=json.dumps(ex.contract),
                kind=self.skill.kind, tools=self.skill.tools,
            )  # fmt: skip
        if self.proposal is None:  # before a task exists (PettingZoo asks every seat)
            return SkillSpObservation(role=self.role(seat))  # type: ignore[arg-type]
        shown = self.skill if self.config.solver_sees_skill and not self.heldout else None
        if shown is not None:  # pi_solver(action | observation, skill): the skill's text, never its examples
            return SkillSpObservation(role=self.role(seat), task=self.proposal.prompt, kind=self.proposal.kind,  # type: ignore[arg-type]
                                      skill=shown.name, description=shown.description, rules=shown.rules)
        return SkillSpObservation(role=self.role(seat), task=self.proposal.prompt, kind=self.proposal.kind)  # type: ignore[arg-type]

    def render_messages(self, observation: SkillSpObservation) -> list[ChatMessage]:
        messages = prompts.render(observation)
        prefix = self.config.proposer_prefix
        if prefix and observation.role == "proposer":  # the reply continues this written start
            messages.append({"role": "assistant", "content": prefix, "continue_final": True})
        return messages

    def parse(self, seat: str, text: str) -> Any:
        if seat == "proposer":
            return parse_proposal(self.config.proposer_prefix + text)
        return parse_answer(text)

    def action_text(self, action: Any) -> str | None:
        if isinstance(action, Proposal):
            return json.dumps({"task": action.prompt, "contract": action.contract})
        return json.dumps(action)

    # ----------------------------------------------------------------- sandbox
    def _files(self) -> dict[str, str]:
        return {"validators.py": self.validators, "tools.py": TOOLS_SOURCE, "judge.py": JUDGE_SOURCE}

    def _run(self, jobs: list[Job]) -> list[SandboxResult]:
        return shared_pool(self.config.sandbox, self.config.sandbox_workers).map(jobs)

    def _judge(self, responses: Mapping[str, Any]) -> dict[str, tuple[bool, Any]]:
        """(correct, answer) per seat; unparsed responses are wrong and abstain.

        The answer is always the trusted one (judging.py): a validator that fails on a
        response makes it wrong, never an abstention. One pair of sandbox runs judges the
        whole phase; if the answers' run fails, or every check failed (one hostile response
        can take the validators' run down), each response is judged in its own runs,
        concurrently in the pool, so only the offending response fails.
        """
        if self.proposal is None:
            raise RuntimeError("responses are judged only after a verified proposal")
        seats = [s for s, r in responses.items() if not isinstance(r, Invalid)]
        out: dict[str, tuple[bool, Any]] = {s: (False, None) for s in responses}
        if not seats:
            return out
        contract = self.proposal.contract
        [batch] = self._run([Job(files=self._files(), module="judge", function="evaluate_all",
                                 kwargs={"contract": contract, "responses": [responses[s] for s in seats]})])  # fmt: skip
        values = batch.value if batch.ok and isinstance(batch.value, list) and len(batch.value) == len(seats) else None
        if values is None or (len(seats) > 1 and all(isinstance(v, dict) and "error" in v for v in values)):
            jobs = [Job(files=self._files(), module="judge", function="evaluate",
                        kwargs={"contract": contract, "response": responses[s]}) for s in seats]  # fmt: skip
            values = [r.value if r.ok else None for r in self._run(jobs)]
        for seat, value in zip(seats, values, strict=True):
            if isinstance(value, dict):
                out[seat] = (bool(value.get("correct")), value.get("answer"))
        return out

    # ----------------------------------------------------------------- phases
    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        if phase.name == "propose":
            proposal = actions["proposer"]
            if isinstance(proposal, Invalid):
                self.reason = proposal.reason
                self.credit("proposer", "propose", proposal_reward(False, False, None))
                return None
            self.proposal = proposal
            [result] = self._run([Job(files=self._files(), module="validators", function="validate",
                                      kwargs={"contract": proposal.contract})])  # fmt: skip
            self.verified = result.ok and result.value == []
            if not self.verified:
                self.reason = str(result.value if result.ok else f"{result.status}: {result.reason}")[:300]
                self.credit("proposer", "propose", proposal_reward(True, False, None))
                return None
            return Phase("probe", self.probe_seats)
        if phase.name == "probe":
            if self.proposal is None:
                raise RuntimeError("the probe phase follows a verified proposal")
            judged = self._judge(actions)
            self.verdict = probe_verdict(
                [judged[s][0] for s in self.probe_seats], [judged[s][1] for s in self.probe_seats],
                self.proposal.contract["answer"], self.config.probes,
            )  # fmt: skip
            self.credit("proposer", "propose", proposal_reward(True, True, self.verdict))
            if not self.verdict.consistent:
                self.reason = "the probes' majority does not match the contract"
                return None
            return Phase("solve", self.solver_seats)
        judged = self._judge(actions)
        self.solved = [judged[s][0] for s in self.solver_seats]
        for seat in self.solver_seats:
            self.credit(seat, "solve", 1.0 if judged[seat][0] else 0.0)
        return None

    # ----------------------------------------------------------------- reports
    def episode_info(self) -> dict[str, str | int | float | bool | None]:
        v = self.verdict
        return {
            "skill": self.heldout_skill if self.heldout else self.skill.name if self.skill is not None else None,
            "stream": "heldout" if self.heldout else "skill" if self.skill is not None else "exploration",
            "parsed": self.proposal is not None,
            "verified": self.verified,
            "consistent": bool(v and v.consistent),
            "v_solve": v.v_solve if v else None,
            "shape": task_shape(self.proposal.contract) if self.proposal else "",
            "proposal": json.dumps({"task": self.proposal.prompt, "contract": self.proposal.contract}) if self.proposal else None,
            "reason": safe_text(self.reason),  # a validator's message may echo anything
        }

    def episode_metrics(self) -> dict[str, float]:
        if self.heldout:
            return {"solver_accuracy": sum(self.solved) / len(self.solved)} if self.solved else {}
        v = self.verdict
        metrics = {
            "parsed": float(self.proposal is not None),
            "verified": float(self.verified),
            "valid": float(bool(v and v.consistent)),
            "skill_stream": float(self.skill is not None),
        }
        if v is not None:
            metrics["v_solve"] = v.v_solve
        if self.solved:
            metrics["solver_accuracy"] = sum(self.solved) / len(self.solved)
        return metrics

    def action_examples(self, seat: str) -> Sequence[str]:
        if seat == "proposer":
            return ['{"task": "What is 6 * 7? Use the calculate tool.", "contract": {"answer": 42, '
                    '"calls": [{"tool": "calculate", "args": {"expression": "6 * 7"}}]}}']  # fmt: skip
        return ['{"tool": "calculate", "args": {"expression": "6 * 7"}}', "42", '{"A": "knight"}']
