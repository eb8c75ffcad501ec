"""Checks of declared private information: replies addressed to some seats, and secrets drawn for one seat.

Both vary one thing and replay the game on the same seed and the same completions
otherwise, comparing what every seat that must not know sees, move by move:

* :func:`check_private_replies`: in a phase with ``Phase(..., audience=...)``,
  one writer's reply is replaced; no seat outside its audience may see a
  difference until the episode ends (in the final views too with ``sealed="forever"``).
* :func:`check_private_draws`: every value a game drew with
  :meth:`~arena.core.game.LLMGame.draw_private` for one seat is drawn again; no
  other seat may see a difference until the episode ends.

Anything a seat sees that depends on the varied value counts, raw text or parsed
values or their consequences (an accepted offer announced to all is a leak).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arena.core.game import LLMGame, Phase
from arena.testing.invariants import (
    _GLOBAL_RANDOM, EnvFn, GlobalRandomWatch, _example_texts, _final_view, _other_text, _replay, _view, _where,
)


@dataclass(frozen=True)
class _Moment:
    """The game before move ``k`` (after the last move: the final views): where it is and each seat's view."""

    where: tuple[object, ...]
    label: str
    views: dict[str, str]


def _label(env: LLMGame, k: int) -> str:
    if env.done:
        return "in the final views, once the episode is over"
    if k == 0:
        return f"at the start, before any move ({env.agent_selection} to move in phase {env.phase.name!r})"
    return f"at {env.agent_selection}'s move in phase {env.phase.name!r} (occurrence {env.phase_index})"


def _trace(env: LLMGame, seed: int, texts: Sequence[str], start: int) -> list[_Moment]:
    """Reset ``env`` and play ``texts``, recording every seat's view before each move from ``start`` on.

    Stops early once the game ends before the texts run out (a varied reply changed its course)."""
    env.reset(seed=seed)
    moments = []
    for k in range(len(texts) + 1):
        view = _final_view if env.done else _view
        views = {s: view(env, s) for s in env.possible_agents} if k >= start else {}
        moments.append(_Moment(_where(env), _label(env, k), views))
        if env.done or k == len(texts):
            break
        env.step(texts[k])
    return moments


def _changes(played: list[_Moment], other: list[_Moment], viewers: Sequence[str], final: bool) -> dict[str, int]:
    """The first move at which each viewer's view differs, while both games are at the same point."""
    first: dict[str, int] = {}
    for k, (a, b) in enumerate(zip(played, other)):
        if a.where != b.where:
            break  # the varied value changed the course of the game (a retry, an early end): nothing comparable
        if not a.views or not b.views or (a.where == (True,) and not final):
            continue
        for viewer in viewers:
            if viewer not in first and a.views[viewer] != b.views[viewer]:
                first[viewer] = k
    return first


def _confirm(env_fn: EnvFn, seed: int, texts: Sequence[str], k: int, viewer: str, seen: str, what: str,
             watch: GlobalRandomWatch) -> None:
    """A difference is a leak only if the game replays: name global random state or nondeterminism otherwise."""
    watch.check(f"seed {seed}, {what}")
    again = _replay(env_fn, seed, list(texts[:k]))
    if (_final_view if again.done else _view)(again, viewer) != seen:
        raise AssertionError(
            f"seed {seed}: {viewer}'s view differs between two replays of the same game (same seed, same "
            f"completions), so the kit cannot check {what}. {_GLOBAL_RANDOM}"
        )


def check_private_replies(env_fn: EnvFn, seed: int = 0) -> None:
    """In a phase with an ``audience``, what a seat outside a writer's audience sees cannot depend on its reply.

    For each writer in each such phase occurrence, the game is replayed with that
    writer's reply replaced by another example (every other completion and the seed
    the same), and every seat outside its audience is compared with the game as
    played at every move from the reply until the episode ends (and in the final
    views when the phase is ``sealed="forever"``). Raw text and parsed values are
    both caught; a consequence shown to all (an accepted offer announced) counts too.
    """
    watch = GlobalRandomWatch()
    env = env_fn()
    steps = _example_texts(env, np.random.default_rng(seed), seed)
    replies: dict[tuple[str, int, str], list[int]] = {}
    for i, (seat, _, (name, occurrence), phase) in enumerate(steps):
        if phase.audience is not None:
            replies.setdefault((name, occurrence, seat), []).append(i)
    if not replies:
        return
    texts = [t for _, t, _, _ in steps]
    played = _trace(env_fn(), seed, texts, start=min(i for idx in replies.values() for i in idx) + 1)
    for (name, occurrence, writer), idx in replies.items():
        phase: Phase = steps[idx[0]][3]
        unknown = sorted(set((phase.audience or {}).get(writer, ())) - set(env.possible_agents))
        assert not unknown, (
            f"phase {name!r} (occurrence {occurrence}): the audience of {writer} names {', '.join(unknown)}, not seats "
            f"of this game ({', '.join(env.possible_agents)})"
        )
        blind = [v for v in env.possible_agents if not phase.may_see(v, writer)]
        if not blind:
            continue
        swapped = [_other_text(env, writer, t) if i in idx else t for i, t in enumerate(texts)]
        other = _trace(env_fn(), seed, swapped, start=idx[0] + 1)
        changed = _changes(played, other, blind, final=phase.kept_until == "forever")
        if not changed:
            continue
        viewer, k = min(changed.items(), key=lambda kv: (kv[1], env.possible_agents.index(kv[0])))
        what = f"phase {name!r} (occurrence {occurrence})"
        _confirm(env_fn, seed, texts, k, viewer, played[k].views[viewer], what, watch)
        audience = ", ".join(phase.audience.get(writer, ())) if phase.audience else ""
        open_now = played[k].where[:2] == (name, occurrence)
        raise AssertionError(
            f"seed {seed}: {what} shows {writer}'s reply only to {audience or 'nobody else'}, but what {viewer} "
            f"sees changes with it {played[k].label}"
            + (", while the phase is open" if open_now else ", after the phase closed")
            + ": the reply (or a value parsed from it, or a consequence of it) reaches a seat outside its audience"
        )
    watch.check(f"seed {seed}, the private-reply check's replays")


def check_private_draws(env_fn: EnvFn, seed: int = 0, tries: int = 4) -> None:
    """No seat's view depends on a secret the game drew for another seat (:meth:`LLMGame.draw_private`).

    For each seat that drew a private value, the game is replayed with that seat's
    draws taken from another generator (the seed and every completion the same), and
    every other seat is compared with the game as played at every move until the
    episode ends. A redraw can repeat the value it replaces, so up to ``tries``
    generators are used, until one changes what the seat itself sees.
    """
    watch = GlobalRandomWatch()
    env = env_fn()
    steps = _example_texts(env, np.random.default_rng(seed), seed)
    seats = [s for s in env.possible_agents if s in env.private_seats]
    if not seats:
        return
    texts = [t for _, t, _, _ in steps]
    played = _trace(env_fn(), seed, texts, start=0)
    for number, seat in enumerate(seats):
        for attempt in range(tries):
            redrawn = env_fn()
            redrawn.kit_redraw = (seat, np.random.default_rng([seed, number, attempt]))
            changed = _changes(played, _trace(redrawn, seed, texts, start=0), env.possible_agents, final=False)
            leaks = {v: k for v, k in changed.items() if v != seat}
            if leaks:
                viewer, k = min(leaks.items(), key=lambda kv: (kv[1], env.possible_agents.index(kv[0])))
                what = f"{seat}'s private draw"
                _confirm(env_fn, seed, texts, k, viewer, played[k].views[viewer], what, watch)
                raise AssertionError(
                    f"seed {seed}: what {viewer} sees changes when only {seat}'s private draw "
                    f"(draw_private) is drawn again, {played[k].label}: {seat}'s secret (or a value computed from "
                    "it) reaches another seat"
                )
            if seat in changed:
                break  # this redraw changed what the seat sees, and nobody else saw it
    watch.check(f"seed {seed}, the private-draw check's replays")


