"""Generic invariants every arena game must hold; each raises AssertionError on failure.

They take an ``env_fn`` (a zero-argument constructor) so users run them on their
own games exactly as the project runs them on the built-in ones.
"""

from __future__ import annotations

import contextlib
import io
import math
import random
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from arena.core.game import LLMGame, Phase
from arena.core.types import Episode
from arena.testing.moves import GameRaised, KitWarning, kit_reset, kit_step, kit_view, where
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
        env = env_fn()
        try:
            api_test(env, num_cycles=num_cycles)
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - the game's bug, reported with where it happened
            raise GameRaised(f"{where(env)}: in PettingZoo's api_test (random text as every action), the game raised "
                             f"{type(e).__name__}: {e}") from e
        seed_test(env_fn, num_cycles=num_cycles)


_GLOBAL_RANDOM = (
    "Does the game draw from global random state (random, numpy.random, time) instead of self.rng / the rng "
    "passed to setup?"
)


class GlobalRandomWatch:
    """Notices the game consuming the global ``random`` or ``numpy.random`` generators since it was made.

    Exact, unlike comparing two runs (two draws from a small range agree by chance)."""

    def __init__(self) -> None:
        self._py = random.getstate()
        _, keys, *self._np_rest = np.random.get_state(legacy=True)  # type: ignore[misc]
        self._np_keys = keys.copy()

    def check(self, what: str) -> None:
        _, keys, *rest = np.random.get_state(legacy=True)  # type: ignore[misc]
        moved = ["random"] if random.getstate() != self._py else []
        if not np.array_equal(keys, self._np_keys) or rest != self._np_rest:
            moved.append("numpy.random")
        if moved:
            raise AssertionError(
                f"{what}: the game drew from global random state ({' and '.join(moved)}) instead of self.rng / the "
                "rng passed to setup, so a seed does not replay the game (any other difference the kit sees follows "
                "from this)"
            )


@contextlib.contextmanager
def global_random_guard(what: str) -> Iterator[None]:
    """Fails when the game consumed global random state inside the block (see :class:`GlobalRandomWatch`)."""
    watch = GlobalRandomWatch()
    yield
    watch.check(what)


def play_texts(env: LLMGame, seed: int, texts: Iterable[str]) -> Episode:
    """Play one game feeding ``texts`` in order (cycled) as every completion."""
    pool = list(texts) or [""]
    kit_reset(env, seed)
    cumulative = {a: 0.0 for a in env.agents}
    k = 0
    for agent in env.agent_iter(max_iter=10_000):
        _, reward, term, trunc, _ = env.last()
        assert math.isfinite(reward), f"non-finite reward {reward} for {agent}"
        cumulative[agent] += reward
        text = None if term or trunc else pool[k % len(pool)]
        kit_step(env, text)
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


def _sealed_open(phase: Phase, done: bool) -> bool:
    return phase.kept_until == "forever" or (phase.kept_until == "episode" and not done)


Audience = tuple[str, ...] | None  # who besides the writer may see a reply (LLMGame.reply_seen_by); None: undeclared


def _may_see_closed(phase: Phase, viewer: str, author: str, audience: Audience) -> bool:
    """After a kept phase closes: the author, and its audience where the phase declares one."""
    return viewer == author or (audience is not None and viewer in audience)


def _may_see_open(phase: Phase, viewer: str, author: str, audience: Audience) -> bool:
    """While a phase is open: nobody else in a hidden one, the audience in a public one with an audience."""
    return viewer == author if phase.hidden else audience is None or viewer == author or viewer in audience


def _secrecy(phase: Phase) -> str:
    if phase.audience is not None or phase.addressed:
        return f"shows each reply to its audience only (kept until {phase.kept_until!r})"
    return f"is sealed ({phase.sealed!r})"


def check_hidden_outputs(env_fn: EnvFn, seed: int = 0) -> None:
    """While a hidden phase is open, no seat's observation or prompt shows another's output from it.

    A sealed phase (``Phase(sealed=...)``) is checked after it closes too: until the
    episode ends (``"episode"``) or also in the final views (``"forever"``). In a
    phase with an ``audience`` (or ``addressed``: each reply names its own) a seat
    outside a writer's audience never sees the raw reply (while open, and after it
    closes for as long as ``Phase.kept_until``).
    """
    env = env_fn()
    kit_reset(env, seed)
    rng = np.random.default_rng(seed)
    makers = {s: _markers(env, s, rng) for s in env.possible_agents}
    Marks = dict[str, tuple[str, Audience]]  # author -> (its marker, who may see it)
    open_marks: Marks = {}
    sealed: list[tuple[Phase, tuple[str, int], Marks]] = []
    phase = (env.phase.name, env.phase_index)  # an occurrence, not a name: phases may repeat
    current = env.phase

    def look() -> None:
        for viewer in env.possible_agents:
            seen = _final_view(env, viewer) if env.done else _view(env, viewer)
            marks = []
            if not env.done and (current.hidden or current.kept_until):
                what = "is hidden" if current.hidden else _secrecy(current)
                marks.append((current, phase, what, open_marks, _may_see_open))
            kept = [(p, occ, m) for p, occ, m in sealed if _sealed_open(p, env.done)]
            marks += [(p, occ, _secrecy(p), m, _may_see_closed) for p, occ, m in kept]
            for p, occ, what, by_author, allowed in marks:
                for author, (mark, audience) in by_author.items():
                    assert allowed(p, viewer, author, audience) or mark not in seen, (
                        f"seed {seed}: phase {occ!r} {what} but {viewer} can see {author}'s output"
                        + (" after it closed" if occ != phase or env.done else "")
                    )

    while not env.done:
        if (env.phase.name, env.phase_index) != phase:
            if current.kept_until:
                sealed.append((current, phase, open_marks))
            phase, open_marks, current = (env.phase.name, env.phase_index), {}, env.phase
        look()
        seat = env.agent_selection
        text, mark = next(makers[seat])
        kit_step(env, text)
        open_marks[seat] = (mark, env.reply_seen_by(*phase, seat))
    if current.kept_until:
        sealed.append((current, phase, open_marks))
    if any(p.kept_until == "forever" for p, _, _ in sealed):
        look()  # the final views


def _view(env: LLMGame, seat: str) -> str:
    return kit_view(env, seat, lambda e, s: e.observe(s).model_dump_json() + repr(e.prompt(s)))


def _raw_final_view(env: LLMGame, seat: str) -> str:
    try:
        final = env.observe_seat(seat)
        return final.model_dump_json() + repr(env.render_messages(final))
    except Exception:  # noqa: BLE001 - a game need not describe a finished game (LLMGame.observe)
        return env.observe(seat).model_dump_json()


def _final_view(env: LLMGame, seat: str) -> str:
    """What a seat is shown once the episode is over (its final observation, rendered)."""
    return kit_view(env, seat, _raw_final_view)


Step = tuple[str, str, tuple[str, int], Phase]


def _example_texts(env: LLMGame, rng: np.random.Generator, seed: int) -> list[Step]:
    """Play one game on the seats' example completions: (seat, text, phase occurrence, phase) per step."""
    kit_reset(env, seed)
    steps = []
    while not env.done:
        seat = env.agent_selection
        examples = env.action_space(seat).examples or ("",)
        text = examples[int(rng.integers(len(examples)))]
        steps.append((seat, text, (env.phase.name, env.phase_index), env.phase))
        kit_step(env, text)
    return steps


def _other_text(env: LLMGame, seat: str, text: str) -> str:
    examples = [e for e in (env.action_space(seat).examples or ()) if e != text]
    return examples[0] if examples else text + " (something else)"


def _replay(env_fn: EnvFn, seed: int, texts: list[str]) -> LLMGame:
    env = env_fn()
    kit_reset(env, seed)
    for text in texts:
        kit_step(env, text)
    return env


def _where(env: LLMGame) -> tuple[Any, ...]:
    return (True,) if env.done else (env.phase.name, env.phase_index, env.agent_selection)


def check_hidden_information(env_fn: EnvFn, seed: int = 0) -> None:
    """In a hidden phase, what a seat sees cannot depend on what the others wrote in it.

    For each hidden phase occurrence, just before its last move, every seat's
    observation and prompt are compared between the game as played and the same
    game in which every OTHER seat wrote a different completion in that phase.
    This catches parsed values leaking (a running tally, a "highest bid so far"),
    not only raw text. A sealed phase is compared again after it closes: at the
    next move and at the episode's last move, and for ``sealed="forever"`` in the
    final views once the episode is over. A phase with an ``audience`` is compared
    here only while open; :func:`arena.testing.privacy.check_private_replies`
    checks its audiences after it closes.
    """
    watch = GlobalRandomWatch()
    env = env_fn()
    steps = _example_texts(env, np.random.default_rng(seed), seed)
    occurrences: dict[tuple[str, int], list[int]] = {}
    for i, (_, _, key, phase) in enumerate(steps):
        if phase.hidden:
            occurrences.setdefault(key, []).append(i)
    for (name, occurrence), idx in occurrences.items():
        last, phase = idx[-1], steps[idx[-1]][3]
        points = [last]
        if phase.sealed and phase.audience is None:
            points += sorted({p for p in (last + 1, len(steps) - 1) if last < p < len(steps)})
            if phase.sealed == "forever":
                points.append(len(steps))
        compared = len({steps[i][0] for i in idx}) < 2  # one writer: nothing to swap, nothing to miss
        for point in points:
            texts = [t for _, t, _, _ in steps[:point]]
            played = _replay(env_fn, seed, texts)
            for viewer in played.possible_agents:
                swapped = [
                    _other_text(played, seat, text) if i in idx and seat != viewer else text
                    for i, (seat, text, _, _) in enumerate(steps[:point])
                ]
                other = _replay(env_fn, seed, swapped)
                if _where(other) != _where(played):
                    continue  # the swap changed the course of the game (a retry); nothing comparable
                compared = True
                view = _final_view if played.done else _view
                if view(played, viewer) == view(other, viewer):
                    continue
                watch.check(f"seed {seed}, hidden phase {name!r}")  # a difference from global random is not a leak
                if view(_replay(env_fn, seed, texts), viewer) != view(played, viewer):
                    raise AssertionError(
                        f"seed {seed}: {viewer}'s view differs between two replays of the same game (same seed, same "
                        f"completions), so the kit cannot check hidden phase {name!r}. {_GLOBAL_RANDOM}"
                    )
                writers = sorted({steps[i][0] for i in idx if i < point and steps[i][0] != viewer})
                if point == last:
                    when = "before the phase closes"
                elif played.done:
                    when = f"after the episode ended, though the phase is sealed={phase.sealed!r}"
                else:
                    when = f"after the phase closed, though it is sealed={phase.sealed!r}"
                raise AssertionError(
                    f"phase {name!r} (occurrence {occurrence}) is hidden, but what {viewer} sees changes with what "
                    f"{', '.join(writers)} wrote in it: an output (or a value parsed from it) leaks into its "
                    f"observation or prompt {when}"
                )
        if not compared:
            warnings.warn(KitWarning(
                f"seed {seed}: the kit could not check hidden phase {name!r} (occurrence {occurrence}): every other "
                "reply it tried changed the course of play (a retry, another seat to move), so no view could be "
                "compared; give action_examples that parse"), stacklevel=2)
    watch.check(f"seed {seed}, the hidden-information check's replays")


UNPARSEABLE = ("", " ", "\n\n", "\x00\x01\x02", "\u202e\u200b\ufeff")


def check_unparseable_is_invalid(env_fn: EnvFn, seed: int = 0, texts: Iterable[str] = UNPARSEABLE) -> None:
    """A reply nobody could parse is marked invalid, never silently turned into a default action.

    Every other move gets one of ``texts`` (empty, blank, control characters), the
    rest a seat's example, so the game reaches its later phases. Phases declared
    ``Phase(..., free_text=True)`` (any text is an action there) are skipped.
    """
    pool = list(texts)
    for offset in (0, 1):
        env = env_fn()
        kit_reset(env, seed)
        rng = np.random.default_rng(seed)
        k = 0
        while not env.done and k < 10_000:
            seat, phase = env.agent_selection, env.phase
            examples = env.action_space(seat).examples or ("",)
            bad = (k + offset) % 2 == 0
            text = pool[(k // 2) % len(pool)] if bad else examples[int(rng.integers(len(examples)))]
            kit_step(env, text)
            turn = env.turns[-1]
            assert not (bad and turn.valid and not phase.free_text), (
                f"{seat} in phase {phase.name!r}: the unparseable reply {text!r} became the action {turn.action!r}; "
                "parse must return Invalid(reason) for it (or declare Phase(..., free_text=True) if any text is "
                "a legal action in that phase)"
            )
            k += 1


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
    rng = np.random.default_rng(seed)
    with global_random_guard(f"seed {seed}: reset and {steps} steps on example completions"):
        kit_reset(a, seed)
        kit_reset(b, seed)
        for k in range(steps):
            if a.done or b.done:
                break
            for seat in a.possible_agents:
                if _view(a, seat) != _view(b, seat):
                    raise AssertionError(
                        f"seed {seed}, step {k}: {seat}'s observation in phase {a.phase.name!r} differs between two "
                        f"games reset with the same seed and given the same completions. {_GLOBAL_RANDOM}"
                    )
            seat = a.agent_selection
            examples = a.action_space(seat).examples or ("",)
            text = examples[int(rng.integers(len(examples)))]
            kit_step(a, text)
            kit_step(b, text)


def check_seeded_replay(env_fn: EnvFn, policy_fn: Callable[[], object], seed: int = 0) -> None:
    """The same seed and scripted policy give byte-identical episodes.

    With cross-episode state, both replays read the same snapshot, and the state is
    then updated with the episode: a snapshot taken before the update still
    replays the episode exactly (envs never see the live object).
    """
    from arena.runner import play_one_at_a_time

    def play(snapshot: Any) -> Episode:
        env = env_fn()
        try:
            return play_one_at_a_time(env, {"p": policy_fn()}, seed, state=snapshot)  # type: ignore[dict-item]
        except Exception as e:  # noqa: BLE001 - the game's (or the bot's) bug, reported with where it happened
            raise GameRaised(f"{where(env)}: playing the scripted policy, the game raised {type(e).__name__}: "
                             f"{e}") from e

    state = env_fn().make_state()
    snapshot = state.snapshot() if state is not None else None
    a = play(snapshot)
    b = play(snapshot)
    if a.model_dump_json() != b.model_dump_json():
        where = next(
            (f"turn {x.index} ({x.seat}, phase {x.phase!r})" for x, y in zip(a.turns, b.turns) if x != y),
            "the episode's totals or metrics",
        )
        raise AssertionError(
            f"seed {seed}: the same seed and scripted policy gave different episodes, first at {where}. "
            f"{_GLOBAL_RANDOM}"
        )
    if state is not None:
        state.update([a], {})
        c = play(snapshot)
        assert c.model_dump_json() == a.model_dump_json(), (
            "updating the game state changed a replay from an earlier snapshot: the snapshot is not frozen"
        )
