"""How the kit calls into a game: an exception the game raises is reported with the seed, the seat and the phase.

A game's own bug (a ``list.remove`` of a seat that is not there, an ``int()`` on a reply) would otherwise
surface as a bare ``ValueError`` from deep inside a replay, naming nothing. Every reset, move and view the
kit makes goes through :func:`kit_reset`, :func:`kit_step` and :func:`kit_view`, which re-raise it as a
:class:`GameRaised` (an ``AssertionError``: a failed check) that says where, with the original chained.
"""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from arena.core.game import LLMGame

T = TypeVar("T")

#: Frames of these folders are the engine's or a library's, never the game's own code.
_NOT_THE_GAME = tuple({sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}) + (
    str(Path(__file__).parents[1] / "core"), str(Path(__file__).parent))


class GameRaised(AssertionError):
    """The game raised while the kit played it; the message names the seed, the seat and the phase."""


class KitWarning(UserWarning):
    """The kit could not check something it was asked to (a secret whose every redraw changed the course of
    play): nothing was found wrong, but nothing was compared either."""


def _hook(e: BaseException) -> str:
    """`` (in close_night, tests/fixtures/werewolf.py:140)``: the innermost frame of the game's own code."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(_NOT_THE_GAME)]
    if not frames:
        return ""
    path = Path(frames[-1].filename)
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    return f" (in {frames[-1].name}, {shown}:{frames[-1].lineno})"


def where(env: LLMGame) -> str:
    """``seed 3: player_2 in phase 'vote' (occurrence 1)``: the env's seed, the seat to move and the open phase."""
    seed = getattr(env, "_seed", None)
    if not env.agents or getattr(env, "_phase", None) is None:
        return f"seed {seed}"
    return f"seed {seed}: {env.agent_selection} in phase {env.phase.name!r} (occurrence {env.phase_index})"


def kit_reset(env: LLMGame, seed: int | None, options: dict | None = None) -> None:
    try:
        env.reset(seed=seed, options=options)
    except Exception as e:  # noqa: BLE001 - the game's bug, reported with where it happened
        raise GameRaised(f"seed {seed}: reset raised {type(e).__name__}: {e}{_hook(e)}") from e


def kit_step(env: LLMGame, text: str | None) -> None:
    """``env.step(text)``; what the game raises comes back naming the seed, seat, phase and completion."""
    at = where(env)
    try:
        env.step(text)
    except Exception as e:  # noqa: BLE001 - any exception here is the game's bug
        raise GameRaised(
            f"{at}: the game raised {type(e).__name__}: {e}{_hook(e)} on the completion {(text or '')[:80]!r}; "
            "parse must return a value or Invalid(reason) for any string, and close_phase must accept any "
            "parsed actions (Invalid ones included)"
        ) from e


def kit_view(env: LLMGame, seat: str, view: Callable[[LLMGame, str], T]) -> T:
    """``view(env, seat)`` (an observation rendered); what the game raises names the seed, viewer and phase."""
    try:
        return view(env, seat)
    except Exception as e:  # noqa: BLE001 - the game's bug
        raise GameRaised(f"{where(env)}: the game raised {type(e).__name__}: {e}{_hook(e)} while showing "
                         f"{seat} its observation") from e
