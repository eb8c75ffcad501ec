"""Play many games at once, batching every pending turn into one call per policy.

Each tick the runner asks every live env for the seats that can be generated
now (all unplayed seats of a hidden phase, else the seat to move), groups those
requests by the policy that owns the seat, makes ONE ``generate`` call per
policy, and steps the envs in AEC order. Finished games become
:class:`~arena.types.Episode` records and their env slot starts the next seed.

Per-request seeds are a hash of (episode, phase, seat, attempt), so a seeded
game yields the same episode whether it is played here in a batch of many or
one turn at a time (:func:`play_one_at_a_time`).
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from arena.game import LLMGame
from arena.types import Episode
from policies.base import Completion, Policy, Request, SamplingParams


@dataclass
class SeatMap:
    """Seat name patterns (``fnmatch``) -> policy name; the first match wins."""

    rules: Mapping[str, str] = field(default_factory=lambda: {"*": "policy"})

    def policy_for(self, seat: str) -> str:
        for pattern, policy in self.rules.items():
            if fnmatch.fnmatchcase(seat, pattern):
                return policy
        raise KeyError(f"no policy for seat {seat!r}; add a pattern to seats (e.g. '*': trainable)")


def request_seed(episode_id: str, phase: str, seat: str, attempt: int) -> int:
    digest = hashlib.blake2b(f"{episode_id}/{phase}/{seat}/{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def build_request(env: LLMGame, seat: str, params: SamplingParams) -> Request:
    attempt = sum(1 for t in env.turns if t.seat == seat and t.phase == env.phase.name)
    return Request(
        messages=env.prompt(seat),
        params=params,
        seed=request_seed(env.episode_id, env.phase.name, seat, attempt),
        seat=seat,
        observation=env.observe(seat),
    )


def apply_completion(env: LLMGame, completion: Completion, policy_name: str) -> None:
    env.step(completion.text)
    env.annotate_last_turn(
        policy=policy_name,
        prompt_ids=completion.prompt_ids,
        completion_ids=completion.completion_ids,
        logprobs=completion.logprobs,
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
        sampling: Mapping[str, SamplingParams] | None = None,
        num_envs: int = 8,
        progress: bool = False,
    ):
        self.envs = [make_env() for _ in range(num_envs)]
        self.policies = dict(policies)
        self.seats = seats or SeatMap({"*": next(iter(self.policies))})
        self.sampling = dict(sampling or {})
        self.progress = progress
        self.generate_calls = 0
        for seat in self.envs[0].possible_agents:
            name = self.seats.policy_for(seat)
            if name not in self.policies:
                raise KeyError(f"seat {seat!r} maps to policy {name!r}; known policies: {sorted(self.policies)}")

    def play(self, seeds: Sequence[int]) -> list[Episode]:
        """Play one game per seed; episodes come back in seed order."""
        todo = list(enumerate(seeds))[::-1]
        slots: dict[int, int] = {}  # env slot -> position in seeds
        results: dict[int, Episode] = {}
        bar = _progress(len(seeds)) if self.progress else None

        def refill(slot: int) -> None:
            if todo:
                pos, seed = todo.pop()
                self.envs[slot].reset(seed=seed)
                slots[slot] = pos

        for slot in range(min(len(self.envs), len(seeds))):
            refill(slot)
        while slots:
            self._tick([self.envs[s] for s in slots])
            for slot in [s for s in slots if self.envs[s].done]:
                results[slots.pop(slot)] = finish(self.envs[slot])
                if bar is not None:
                    bar.update(1)
                refill(slot)
        if bar is not None:
            bar.close()
        return [results[i] for i in range(len(seeds))]

    def _tick(self, envs: list[LLMGame]) -> None:
        batches: dict[str, list[tuple[int, str, Request]]] = defaultdict(list)
        for i, env in enumerate(envs):
            for seat in env.pending_seats():
                name = self.seats.policy_for(seat)
                batches[name].append((i, seat, build_request(env, seat, self.sampling.get(name, SamplingParams()))))
        ready: list[dict[str, Completion]] = [{} for _ in envs]
        for name, items in batches.items():
            completions = self.policies[name].generate([req for _, _, req in items])
            self.generate_calls += 1
            for (i, seat, _), comp in zip(items, completions, strict=True):
                ready[i][seat] = comp
        for env, comps in zip(envs, ready, strict=True):
            # Step in AEC order; a seat asked to retry stays selected and is
            # regenerated next tick.
            while not env.done and env.agent_selection in comps:
                seat = env.agent_selection
                apply_completion(env, comps.pop(seat), self.seats.policy_for(seat))


def play_one_at_a_time(
    env: LLMGame,
    policies: Mapping[str, Policy],
    seed: int,
    seats: SeatMap | None = None,
    sampling: Mapping[str, SamplingParams] | None = None,
) -> Episode:
    """Reference loop: one env, one turn per generate call."""
    seats = seats or SeatMap({"*": next(iter(policies))})
    sampling = sampling or {}
    env.reset(seed=seed)
    while not env.done:
        seat = env.agent_selection
        name = seats.policy_for(seat)
        (completion,) = policies[name].generate([build_request(env, seat, sampling.get(name, SamplingParams()))])
        apply_completion(env, completion, name)
    return finish(env)


def _progress(total: int):  # noqa: ANN202 - tqdm's type is private
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="games", unit="game", leave=False)
