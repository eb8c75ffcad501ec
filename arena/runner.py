"""Play many games at once, batching every pending turn into one call per policy.

Each tick the runner asks every live env for the seats that can be generated
now (all unplayed seats of a hidden phase, else the seat to move), groups those
requests by the policy that owns the seat, makes ONE ``generate`` call per
policy, and steps the envs in AEC order. Policies that share an engine (a
``shared_engine`` attribute: vLLM adapters over one base, arena/policies/vllm.py)
are asked together: the engine's ``generate([(policy, requests), ...])`` is
one call for all of them, each request under its own policy's adapter.
Finished games become :class:`~arena.core.types.Episode` records and their env slot starts the next seed.

Per-request seeds are a hash of (episode, phase occurrence, seat, attempt), so
a seeded game yields the same episode whether it is played here in a batch of
many or one turn at a time (:func:`play_one_at_a_time`).

``play`` takes :class:`EpisodeSpec` s: a seed, reset options (a fixed spy, a
chosen task) and, optionally, the seat -> policy map of that one game, so a
tournament can seat different checkpoints at different tables in one batch.
Sampling settings come per policy and per phase. A completion whose prompt did
not fit the policy's context (``finish_reason == "overflow"``) ends its game as
a truncation; it never fails the batch. A game with cross-episode state reads
the snapshot bound at the start of ``play``. A game that hands a seat choices
(:meth:`~arena.core.game_hooks.GameRules.action_choices`, OpenSpiel's ``action_mode: score``)
has them carried in the seat's request (``Request.choices``).
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.core.game import GameState, LLMGame
from arena.core.types import ChatMessage, Episode, safe_text
from arena.policies.base import Completion, Policy, Request, SamplingParams

#: (policy name, phase) -> sampling settings.
SamplingFn = Callable[[str, str], SamplingParams]


class RunnerSection(BaseModel):
    """How rollouts are played (the config's ``runner:`` section)."""

    model_config = ConfigDict(extra="forbid")

    num_envs: int = Field(default=8, ge=1, description="Games played at once; their turns share generate calls.")
    progress: bool = Field(default=True, description="Show a progress bar on long rollouts.")
    episodes_jsonl: str | None = Field(default=None, description="Append finished episodes to this JSONL file.")


@dataclass
class SeatMap:
    """Seat name patterns (``fnmatch``) -> policy name; the first match wins."""

    rules: Mapping[str, str] = field(default_factory=lambda: {"*": "policy"})

    def policy_for(self, seat: str) -> str:
        for pattern, policy in self.rules.items():
            if fnmatch.fnmatchcase(seat, pattern):
                return policy
        raise KeyError(f"no policy for seat {seat!r}; add a pattern to seats (e.g. '*': trainable)")


@dataclass(frozen=True)
class EpisodeSpec:
    """One game to play: its seed, reset options and (optionally) its own seat map."""

    seed: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    seats: SeatMap | None = None


def as_spec(item: EpisodeSpec | int | None) -> EpisodeSpec:
    return item if isinstance(item, EpisodeSpec) else EpisodeSpec(seed=item)


def fixed_sampling(table: Mapping[str, SamplingParams] | None = None) -> SamplingFn:
    """Sampling per policy name, the same in every phase (defaults where a name is missing)."""
    table = dict(table or {})
    return lambda policy, phase: table.get(policy, SamplingParams())


def request_seed(episode_id: str, phase: str, seat: str, attempt: int, occurrence: int = 0) -> int:
    # Occurrence 0 hashes as before, so single-occurrence games keep their seeds.
    where = phase if occurrence == 0 else f"{phase}#{occurrence}"
    digest = hashlib.blake2b(f"{episode_id}/{where}/{seat}/{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def build_request(env: LLMGame, seat: str, params: SamplingParams) -> Request:
    phase, occurrence = env.phase.name, env.phase_index
    attempt = sum(1 for t in env.turns if t.seat == seat and t.phase == phase and t.phase_index == occurrence)
    return Request(
        messages=env.prompt(seat),
        params=params,
        seed=request_seed(env.episode_id, phase, seat, attempt, occurrence),
        seat=seat,
        observation=env.observe(seat),
        choices=env.action_choices(seat),
    )


def generate_texts(
    policy: Policy, chats: Sequence[list[ChatMessage]], *, temperature: float, max_new_tokens: int, seed: int,
    seat: str = "",
) -> list[str]:
    """One batched ``generate`` call outside a game, for a game state's own model calls (Skill-SP's
    library evolution): chat ``i`` is request ``i``, seeded ``seed + i``; returns the texts in order.
    The trainer binds it to each policy and hands the bound functions to ``GameState.update``
    (:class:`arena.core.game_types.TextGenerator`): games never import a policy (the layer rule)."""
    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens)
    requests = [Request(messages=list(m), params=params, seed=seed + i, seat=seat) for i, m in enumerate(chats)]
    return [safe_text(c.text) for c in policy.generate(requests)]


def apply_completion(env: LLMGame, completion: Completion, policy_name: str) -> None:
    if completion.finish_reason == "overflow":
        env.truncate(f"{env.agent_selection}'s prompt is over {policy_name}'s context length")
        return
    env.step(completion.text)
    env.annotate_last_turn(
        policy=policy_name,
        prompt_ids=completion.prompt_ids,
        completion_ids=completion.completion_ids,
        logprobs=completion.logprobs,
        finish_reason=completion.finish_reason,
        alternatives=completion.alternatives,
    )


def finish(env: LLMGame) -> Episode:
    """Drain the AEC dead steps and return the episode."""
    while env.agents:
        env.step(None)
    return env.episode()


class Runner:
    """Vectorised rollouts over ``num_envs`` concurrent games."""

    def __init__(
        self,
        make_env: Callable[[], LLMGame],
        policies: Mapping[str, Policy],
        seats: SeatMap | None = None,
        sampling: SamplingFn | Mapping[str, SamplingParams] | None = None,
        num_envs: int = 8,
        progress: bool = False,
        state: GameState | None = None,
    ):
        self.envs = [make_env() for _ in range(num_envs)]
        self.policies = dict(policies)
        self.seats = seats or SeatMap({"*": next(iter(self.policies))})
        self.sampling: SamplingFn = sampling if callable(sampling) else fixed_sampling(sampling)
        self.progress = progress
        self.state = state
        self.generate_calls = 0
        #: Called after every generate call with the number of turns it answered (a tournament's progress).
        self.on_generate: Callable[[int], None] | None = None
        self._check_seats(self.seats)

    def _check_seats(self, seats: SeatMap) -> None:
        for seat in self.envs[0].possible_agents:
            name = seats.policy_for(seat)
            if name not in self.policies:
                raise KeyError(f"seat {seat!r} maps to policy {name!r}; known policies: {sorted(self.policies)}")

    def play(self, specs: Sequence[EpisodeSpec | int]) -> list[Episode]:
        """Play one game per spec (or plain seed); episodes come back in the same order."""
        specs = [as_spec(s) for s in specs]
        for spec in specs:
            if spec.seats is not None:
                self._check_seats(spec.seats)
        snapshot = self.state.snapshot() if self.state is not None else None
        todo = list(enumerate(specs))[::-1]
        slots: dict[int, tuple[int, SeatMap]] = {}  # env slot -> (position in specs, seat map)
        results: dict[int, Episode] = {}
        bar = _progress(len(specs)) if self.progress else None

        def refill(slot: int) -> None:
            if todo:
                pos, spec = todo.pop()
                env = self.envs[slot]
                if self.state is not None:
                    env.bind_state(snapshot)
                env.reset(seed=spec.seed, options=dict(spec.options))
                slots[slot] = (pos, spec.seats or self.seats)

        for slot in range(min(len(self.envs), len(specs))):
            refill(slot)
        while slots:
            self._tick({s: slots[s][1] for s in slots})
            for slot in [s for s in slots if self.envs[s].done]:
                results[slots.pop(slot)[0]] = finish(self.envs[slot])
                if bar is not None:
                    bar.update(1)
                refill(slot)
        if bar is not None:
            bar.close()
        return [results[i] for i in range(len(specs))]

    def _tick(self, live: Mapping[int, SeatMap]) -> None:
        batches: dict[str, list[tuple[int, str, Request]]] = defaultdict(list)
        for slot, seats in live.items():
            env = self.envs[slot]
            for seat in env.pending_seats():
                name = seats.policy_for(seat)
                batches[name].append((slot, seat, build_request(env, seat, self.sampling(name, env.phase.name))))
        ready: dict[int, dict[str, Completion]] = {slot: {} for slot in live}
        for names in self._calls(batches):
            asked = [(self.policies[n], [req for _, _, req in batches[n]]) for n in names]
            if len(asked) == 1:
                outs = [asked[0][0].generate(asked[0][1])]
            else:  # policies on one engine: one call, each request under its own policy
                outs = self.policies[names[0]].shared_engine.generate(asked)  # type: ignore[attr-defined]
            self.generate_calls += 1
            if self.on_generate is not None:
                self.on_generate(sum(len(requests) for _, requests in asked))
            for name, completions in zip(names, outs, strict=True):
                for (slot, seat, _), comp in zip(batches[name], completions, strict=True):
                    ready[slot][seat] = comp
        for slot, comps in ready.items():
            env = self.envs[slot]
            # Step in AEC order; a seat asked to retry stays selected and is
            # regenerated next tick.
            while not env.done and env.agent_selection in comps:
                seat = env.agent_selection
                apply_completion(env, comps.pop(seat), live[slot].policy_for(seat))

    def _calls(self, batches: Mapping[str, Any]) -> list[list[str]]:
        """The tick's policies grouped into generate calls: one per policy, or one per shared engine."""
        calls: dict[int | str, list[str]] = {}
        for name in batches:
            engine = getattr(self.policies[name], "shared_engine", None)
            calls.setdefault(id(engine) if engine is not None else name, []).append(name)
        return list(calls.values())


def play_one_at_a_time(
    env: LLMGame,
    policies: Mapping[str, Policy],
    seed: int | EpisodeSpec,
    seats: SeatMap | None = None,
    sampling: SamplingFn | Mapping[str, SamplingParams] | None = None,
    state: Any = None,
) -> Episode:
    """Reference loop: one env, one turn per generate call (``state``: a snapshot to bind)."""
    spec = as_spec(seed)
    seats = spec.seats or seats or SeatMap({"*": next(iter(policies))})
    params: SamplingFn = sampling if callable(sampling) else fixed_sampling(sampling)
    if state is not None:
        env.bind_state(state)
    env.reset(seed=spec.seed, options=dict(spec.options))
    while not env.done:
        seat = env.agent_selection
        name = seats.policy_for(seat)
        (completion,) = policies[name].generate([build_request(env, seat, params(name, env.phase.name))])
        apply_completion(env, completion, name)
    return finish(env)


def _progress(total: int):  # noqa: ANN202 - tqdm's type is private
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="games", unit="game", leave=False)
