"""Generic invariants every arena game must hold; each raises AssertionError on failure.

They take an ``env_fn`` (a zero-argument constructor) so users run them on their
own games exactly as the project runs them on the built-in ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from arena.game import LLMGame
from arena.types import Episode
from pettingzoo.test import api_test, seed_test

EnvFn = Callable[[], LLMGame]


def check_pettingzoo_api(env_fn: EnvFn, num_cycles: int = 50) -> None:
    """PettingZoo's own ``api_test`` and ``seed_test``."""
    api_test(env_fn(), num_cycles=num_cycles)
    seed_test(env_fn, num_cycles=num_cycles)


def play_texts(env: LLMGame, seed: int, texts: Iterable[str]) -> Episode:
    """Play one game feeding ``texts`` in order (cycled) as every completion."""
    pool = list(texts) or [""]
    env.reset(seed=seed)
    cumulative = {a: 0.0 for a in env.agents}
    k = 0
    for agent in env.agent_iter(max_iter=10_000):
        _, reward, term, trunc, _ = env.last()
        assert math.isfinite(reward), f"non-finite reward {reward} for {agent}"
        cumulative[agent] += reward
        env.step(None if term or trunc else pool[k % len(pool)])
        k += 1
    assert not env.agents, "game did not end within 10,000 steps"
    ep = env.episode()
    for seat, total in ep.rewards.items():
        assert math.isclose(total, cumulative[seat], abs_tol=1e-9), (
            f"{seat}: per-turn rewards sum to {total}, PettingZoo accumulated {cumulative[seat]}"
        )
    return ep


def check_any_text_is_legal(env_fn: EnvFn, texts: Iterable[str], seed: int = 0) -> Episode:
    """Any strings as every action: the game ends, never raises, rewards stay finite and agree."""
    return play_texts(env_fn(), seed, texts)


def _markers(env: LLMGame, seat: str, rng: np.random.Generator) -> Iterator[str]:
    examples = env.action_space(seat).examples or ("",)
    for k in range(100):
        marker = f"QZX{seat.replace('_', '')}N{k}QZX"
        yield f"{examples[int(rng.integers(len(examples)))]}\n{marker}", marker


def check_hidden_outputs(env_fn: EnvFn, seed: int = 0) -> None:
    """While a hidden phase is open, no seat's observation or prompt shows another's output from it."""
    env = env_fn()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    makers = {s: _markers(env, s, rng) for s in env.possible_agents}
    open_marks: dict[str, str] = {}
    phase = env.phase.name
    while not env.done:
        if env.phase.name != phase:
            phase, open_marks = env.phase.name, {}
        if env.phase.hidden:
            for viewer in env.possible_agents:
                seen = env.observe(viewer).model_dump_json() + repr(env.prompt(viewer))
                for author, mark in open_marks.items():
                    assert author == viewer or mark not in seen, (
                        f"phase {phase!r} is hidden but {viewer} can see {author}'s output"
                    )
        seat = env.agent_selection
        text, mark = next(makers[seat])
        env.step(text)
        open_marks[seat] = mark


def check_seeded_replay(env_fn: EnvFn, policy_fn: Callable[[], object], seed: int = 0) -> None:
    """The same seed and scripted policy give byte-identical episodes."""
    from arena.runner import play_one_at_a_time

    a = play_one_at_a_time(env_fn(), {"p": policy_fn()}, seed)  # type: ignore[dict-item]
    b = play_one_at_a_time(env_fn(), {"p": policy_fn()}, seed)  # type: ignore[dict-item]
    assert a.model_dump_json() == b.model_dump_json(), "same seed, different episodes"
