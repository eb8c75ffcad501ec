"""Replays the private-information checks share: a game traced move by move (where it is, its course, every
seat's view), and the first move at which two traces differ for a seat (:mod:`arena.testing.privacy`,
:mod:`arena.testing.draws`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from arena.core.game import LLMGame
from arena.testing.invariants import _GLOBAL_RANDOM, EnvFn, GlobalRandomWatch, _final_view, _replay, _view, _where
from arena.testing.moves import kit_reset, kit_step


@dataclass(frozen=True)
class _Moment:
    """The game before move ``k`` (after the last move: the final views): where it is and each seat's view."""

    where: tuple[object, ...]
    course: tuple[object, ...]
    label: str
    views: dict[str, str]


def _label(env: LLMGame, k: int) -> str:
    if env.done:
        return "in the final views, once the episode is over"
    if k == 0:
        return f"at the start, before any move ({env.agent_selection} to move in phase {env.phase.name!r})"
    return f"at {env.agent_selection}'s move in phase {env.phase.name!r} (occurrence {env.phase_index})"


def _course(env: LLMGame) -> tuple[object, ...]:
    """Where the game is, without who moves: the phase occurrence (or the end)."""
    return (True,) if env.done else (env.phase.name, env.phase_index)


def _trace(env: LLMGame, seed: int, texts: Sequence[str], start: int) -> tuple[list[_Moment], LLMGame]:
    """Reset ``env`` and play ``texts``, recording every seat's view before each move from ``start`` on.

    Stops early once the game ends before the texts run out (a varied value changed its course)."""
    kit_reset(env, seed)
    moments = []
    for k in range(len(texts) + 1):
        view = _final_view if env.done else _view
        views = {s: view(env, s) for s in env.possible_agents} if k >= start else {}
        moments.append(_Moment(_where(env), _course(env), _label(env, k), views))
        if env.done or k == len(texts):
            break
        kit_step(env, texts[k])
    return moments, env


def _changes(played: list[_Moment], other: list[_Moment], viewers: Sequence[str], final: bool,
             upto: int | None = None) -> dict[str, int]:
    """The first move (before ``upto``) at which each viewer's view differs."""
    first: dict[str, int] = {}
    for k, (a, b) in enumerate(zip(played[:upto], other[:upto])):
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
