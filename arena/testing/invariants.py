"""Generic invariants every arena game must hold; each raises AssertionError on failure.

They take an ``env_fn`` (a zero-argument constructor) so users run them on their
own games exactly as the project runs them on the built-in ones.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from arena.core.game import LLMGame
from arena.core.types import Episode
from pettingzoo.test import api_test, seed_test

EnvFn = Callable[[], LLMGame]
_PETTINGZOO_NUDGES = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably",
    "Action space for each agent probably",
)


def check_pettingzoo_api(env_fn: EnvFn, num_cycles: int = 50) -> None:
    """PettingZoo's own ``api_test`` and ``seed_test``, called on the game itself (no wrapper)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        # PettingZoo nudges towards NumPy spaces and prints progress lines; arena's
        # typed messages are deliberate, and a failure still raises with its message.
        # api_test resets with options={"options": 1}; the game ignores that key with a warning.
        for pattern in (*_PETTINGZOO_NUDGES, ".*reset ignores unknown option"):
            warnings.filterwarnings("ignore", message=pattern, category=UserWarning)
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
        text = None if term or trunc else pool[k % len(pool)]
        phase = env.phase.name
        try:
            env.step(text)
        except Exception as e:  # noqa: BLE001 - any exception here is the game's bug, reported with where it happened
            raise AssertionError(
                f"{agent} in phase {phase!r}: the game raised {type(e).__name__}: {e} on the completion "
                f"{(text or '')[:80]!r}; parse must return a value or Invalid(reason) for any string"
            ) from e
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
    phase = (env.phase.name, env.phase_index)  # an occurrence, not a name: phases may repeat
    while not env.done:
        if (env.phase.name, env.phase_index) != phase:
            phase, open_marks = (env.phase.name, env.phase_index), {}
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


def _view(env: LLMGame, seat: str) -> str:
    return env.observe(seat).model_dump_json() + repr(env.prompt(seat))


def _example_texts(env: LLMGame, rng: np.random.Generator, seed: int) -> list[tuple[str, str, tuple[str, int], bool]]:
    """Play one game on the seats' example completions: (seat, text, phase occurrence, hidden) per step."""
    env.reset(seed=seed)
    steps = []
    while not env.done:
        seat = env.agent_selection
        examples = env.action_space(seat).examples or ("",)
        text = examples[int(rng.integers(len(examples)))]
        steps.append((seat, text, (env.phase.name, env.phase_index), env.phase.hidden))
        env.step(text)
    return steps


def _other_text(env: LLMGame, seat: str, text: str) -> str:
    examples = [e for e in (env.action_space(seat).examples or ()) if e != text]
    return examples[0] if examples else text + " (something else)"


def _replay(env_fn: EnvFn, seed: int, texts: list[str]) -> LLMGame:
    env = env_fn()
    env.reset(seed=seed)
    for text in texts:
        env.step(text)
    return env


def check_hidden_information(env_fn: EnvFn, seed: int = 0) -> None:
    """In a hidden phase, what a seat sees cannot depend on what the others wrote in it.

    For each hidden phase occurrence, just before its last move, every seat's
    observation and prompt are compared between the game as played and the same
    game in which every OTHER seat wrote a different completion in that phase.
    This catches parsed values leaking (a running tally, a "highest bid so far"),
    not only raw text.
    """
    env = env_fn()
    steps = _example_texts(env, np.random.default_rng(seed), seed)
    occurrences: dict[tuple[str, int], list[int]] = {}
    for i, (_, _, key, hidden) in enumerate(steps):
        if hidden:
            occurrences.setdefault(key, []).append(i)
    for (phase, occurrence), idx in occurrences.items():
        last = idx[-1]
        played = _replay(env_fn, seed, [t for _, t, _, _ in steps[:last]])
        for viewer in played.possible_agents:
            swapped = [
                _other_text(played, seat, text) if i in idx and seat != viewer else text
                for i, (seat, text, _, _) in enumerate(steps[:last])
            ]
            other = _replay(env_fn, seed, swapped)
            if (other.phase.name, other.phase_index, other.agent_selection) != (phase, occurrence, played.agent_selection):
                continue  # the swap changed the course of the game (a retry); nothing comparable
            writers = sorted({steps[i][0] for i in idx[:-1] if steps[i][0] != viewer})
            assert _view(played, viewer) == _view(other, viewer), (
                f"phase {phase!r} (occurrence {occurrence}) is hidden, but what {viewer} sees changes with what "
                f"{', '.join(writers)} wrote in it: an output (or a value parsed from it) leaks into its "
                "observation or prompt before the phase closes"
            )


def check_zero_sum(env_fn: EnvFn, texts: Iterable[str], seed: int = 0) -> None:
    """For a game that declares ``zero_sum``: rewards sum to 0 (within 1e-9) in ``na`` mode.

    ``zero_sum = True``: each episode's totals; a tuple of phase names: the rewards
    credited to each of those phases' turns.
    """
    probe = env_fn()
    declared = probe.zero_sum
    if not declared:
        return
    config = probe.config.model_copy(update={"invalid": probe.config.invalid.model_copy(update={"mode": "na"})})
    ep = play_texts(type(probe)(config), seed, texts)
    groups: dict[str, dict[str, float]] = {}
    if declared is True:
        groups["the episode"] = dict(ep.rewards)
    else:
        for phase in declared:
            for t in ep.turns_of(phase=phase):
                where = groups.setdefault(f"phase {phase!r} (occurrence {t.phase_index})", {})
                where[t.seat] = where.get(t.seat, 0.0) + t.reward
    for where, by_seat in groups.items():
        total = sum(by_seat.values())
        assert abs(total) <= 1e-9, (
            f"{probe.metadata['name']} declares zero_sum, but the rewards of {where} sum to {total:.3g} "
            f"(seed {seed}); by seat: " + ", ".join(f"{s}={r:.3g}" for s, r in by_seat.items())
        )


def check_seed_determinism(env_fn: EnvFn, seed: int = 0, steps: int = 200) -> None:
    """Two games reset with the same seed and fed the same completions see the same at every step."""
    a, b = env_fn(), env_fn()
    a.reset(seed=seed)
    rng = np.random.default_rng(seed)
    b.reset(seed=seed)
    for k in range(steps):
        if a.done or b.done:
            break
        for seat in a.possible_agents:
            if _view(a, seat) != _view(b, seat):
                raise AssertionError(
                    f"seed {seed}, step {k}: {seat}'s observation in phase {a.phase.name!r} differs between two "
                    "games reset with the same seed and given the same completions. Does the game draw from global "
                    "random state (random, numpy.random, time) instead of self.rng / the rng passed to setup?"
                )
        seat = a.agent_selection
        examples = a.action_space(seat).examples or ("",)
        text = examples[int(rng.integers(len(examples)))]
        a.step(text)
        b.step(text)


def check_seeded_replay(env_fn: EnvFn, policy_fn: Callable[[], object], seed: int = 0) -> None:
    """The same seed and scripted policy give byte-identical episodes.

    With cross-episode state, both replays read the same snapshot, and the state is
    then updated with the episode: a snapshot taken before the update still
    replays the episode exactly (envs never see the live object).
    """
    from arena.runner import play_one_at_a_time

    state = env_fn().make_state()
    snapshot = state.snapshot() if state is not None else None
    a = play_one_at_a_time(env_fn(), {"p": policy_fn()}, seed, state=snapshot)  # type: ignore[dict-item]
    b = play_one_at_a_time(env_fn(), {"p": policy_fn()}, seed, state=snapshot)  # type: ignore[dict-item]
    if a.model_dump_json() != b.model_dump_json():
        where = next(
            (f"turn {x.index} ({x.seat}, phase {x.phase!r})" for x, y in zip(a.turns, b.turns) if x != y),
            "the episode's totals or metrics",
        )
        raise AssertionError(
            f"seed {seed}: the same seed and scripted policy gave different episodes, first at {where}. "
            "Does the game use global random state (random, numpy.random) instead of self.rng?"
        )
    if state is not None:
        state.update([a], {})
        c = play_one_at_a_time(env_fn(), {"p": policy_fn()}, seed, state=snapshot)  # type: ignore[dict-item]
        assert c.model_dump_json() == a.model_dump_json(), (
            "updating the game state changed a replay from an earlier snapshot: the snapshot is not frozen"
        )
