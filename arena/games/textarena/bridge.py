"""The thin layer between arena and TextArena: private random state, dry runs, observations.

Nothing here knows about PettingZoo or arena's phases; the env (``arena/games/textarena/env.py``)
wires these functions into :class:`~arena.core.game.LLMGame`.

* **Random state.** TextArena draws from the *global* ``random`` module (its
  ``State.__init__`` calls ``random.seed(seed)``; Kuhn poker shuffles and the
  negotiation game deals with ``random``), which would break arena's rule that an
  env owns its randomness. :class:`PrivateRandom` holds TextArena's own ``random``
  (and ``numpy.random``) state and swaps it in only for the duration of a
  TextArena call, restoring the caller's global state afterwards, so TextArena
  sees an ordinary seeded ``random`` and nobody else notices it ran.
* **Invalid moves** are exactly the calls of TextArena's ``state.set_invalid_move``
  during a step: :func:`step_recording` records their reasons.
* **Dry runs**: :func:`dry_run` steps a deep copy of the env (on a copy of the random
  state), so validity is known without touching the game.
* **Observations**: :func:`peek_observation` is what TextArena's ``get_observation``
  would return to a player now, read from a copy (the real call drains the player's
  message queue, so it cannot be asked twice or for a player who is not to move).
* **Parsers bounded in time**: :func:`make_env` swaps a TextArena pattern that backtracks
  for :class:`LinearOfferPattern`, which finds the same match in linear time (issue 39).
"""

from __future__ import annotations

import copy
import difflib
import io
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

#: TextArena's own agents' system prompt (``textarena.agents.basic_agents.STANDARD_GAME_PROMPT``).
STANDARD_GAME_PROMPT = (
    "You are a competitive game player. Make sure you read the game instructions carefully, "
    "and always follow the required format."
)
#: SPIRAL's three games, named first in error messages.
SPIRAL_IDS = ("TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0")
#: Games whose every TextArena outcome is zero-sum (win +1 / loss -1 / draw 0, forfeits
#: included), checked by reading their code and by the conformance kit; any id variant
#: (``-v0``, ``-v0-short``, ``-train``, ``-raw``) of these bases.
ZERO_SUM_BASES = ("TicTacToe", "KuhnPoker", "SimpleNegotiation")


def registry() -> dict[str, Any]:
    """TextArena's environment registry (importing textarena registers every id)."""
    from textarena.envs.registration import ENV_REGISTRY

    return ENV_REGISTRY


def unknown_id_message(env_id: str) -> str:
    """One line naming a few valid ids: the closest spellings, else SPIRAL's three."""
    ids = sorted(registry())
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.6)
    examples = list(dict.fromkeys([*close, *SPIRAL_IDS]))[:5]
    return f"unknown TextArena environment id; valid ids include {', '.join(examples)} ({len(ids)} in all)"


def declared_zero_sum(env_id: str) -> bool:
    """Whether arena declares ``env_id`` zero-sum by default (see :data:`ZERO_SUM_BASES`)."""
    return env_id.split("-v", 1)[0] in ZERO_SUM_BASES


class PrivateRandom:
    """TextArena's private ``random`` and ``numpy.random`` state, seeded with ``seed``."""

    def __init__(self, seed: int):
        self.py_state = random.Random(seed).getstate()
        self.np_state = np.random.RandomState(seed).get_state()

    @contextmanager
    def active(self, keep: bool = True) -> Iterator[None]:
        """Swap this state in for the block; ``keep=False`` discards what the block drew (a dry run)."""
        outer_py, outer_np = random.getstate(), np.random.get_state()
        random.setstate(self.py_state)
        np.random.set_state(self.np_state)
        try:
            yield
        finally:
            if keep:
                self.py_state, self.np_state = random.getstate(), np.random.get_state()
            random.setstate(outer_py)
            np.random.set_state(outer_np)


#: SimpleNegotiation's offer pattern (textarena 0.7.4). It backtracks: cubic in a run of whitespace after
#: ``[Offer:`` (1,600 spaces: 15 s), quadratic in a run of dots (1 MB: hours).
NEGOTIATION_OFFER = r"\[Offer:?\s*(?:I\s+(?:give|offer)\s+)?([^\[\]]+?)\s*\.*\]"
_OFFER_FLAGS = re.IGNORECASE | re.DOTALL
_OFFER = re.compile(NEGOTIATION_OFFER, _OFFER_FLAGS)
_OFFER_OPEN = re.compile(r"\[Offer", re.IGNORECASE)
_BRACKET = re.compile(r"[\[\]]")
_OFFER_LEAD = re.compile(r":?\s*(?:I\s+(?:give|offer)\s+)?", _OFFER_FLAGS)


@dataclass(frozen=True)
class OfferMatch:
    """The part of ``re.Match`` that SimpleNegotiation reads (``group(1)``), with the span."""

    string: str
    span_: tuple[int, int]
    offer: str

    def group(self, index: int = 0) -> str:
        if index not in (0, 1):
            raise IndexError("no such group")
        return self.offer if index else self.string[self.span_[0]:self.span_[1]]

    def span(self) -> tuple[int, int]:
        return self.span_


class LinearOfferPattern:
    """``re.compile(NEGOTIATION_OFFER, re.I | re.S)``'s ``search`` in linear time: the same span and group.

    A match opens at an ``[Offer`` and, since no part of the pattern after it takes a bracket, closes at
    the first bracket after it, which must be ``]``. Between them (``body``) the backtracking engine takes
    the greedy lead (``:``, spaces, ``I give``) and then the shortest offer that leaves only spaces then
    dots before the ``]``: ``body[lead:max(lead + 1, end of body without its trailing dots and spaces)]``.
    Only when the lead is the whole body does the engine back into it; there the original pattern runs on
    that one bounded match, which is a few steps (the body is then only ``:``, spaces and ``I give``).
    """

    pattern = NEGOTIATION_OFFER
    flags = _OFFER.flags

    def search(self, text: str) -> OfferMatch | None:
        for opening in _OFFER_OPEN.finditer(text):
            close = _BRACKET.search(text, opening.end())
            if close is None:
                return None  # no bracket after this opening, so none after any later one either
            if close.group() == "[":
                continue
            body = text[opening.end():close.start()]
            lead = _OFFER_LEAD.match(body).end()  # type: ignore[union-attr]  # every part is optional
            if lead < len(body):
                offer = body[lead:max(lead + 1, len(body.rstrip(".").rstrip()))]
            else:
                whole = _OFFER.match(text, opening.start(), close.end())
                if whole is None:
                    continue
                offer = whole.group(1)
            return OfferMatch(text, (opening.start(), close.end()), offer)
        return None


def bound_parsers(env: Any) -> Any:
    """Replace the TextArena patterns that backtrack on some replies with linear ones that match the same."""
    core = env
    while "env" in vars(core):  # a wrapper (its attribute reads fall through to the env it wraps)
        core = core.env
    found = vars(core).get("offer_pattern")
    if isinstance(found, re.Pattern) and found.pattern == NEGOTIATION_OFFER and found.flags == _OFFER.flags:
        core.offer_pattern = LinearOfferPattern()
    return env


class MissingData(RuntimeError):
    """A TextArena game whose data (NLTK's word lists and tagger) is not installed and could not be
    downloaded; ``str(err)`` is one line naming what is missing and how to install it."""


@contextmanager
def nltk_quiet(missing: list[str]) -> Iterator[None]:
    """NLTK's downloader, which TextArena's word games call when they are first imported, without its
    four lines per failed download (it writes them to the ``sys.stderr`` of NLTK's own import, so
    redirecting stderr cannot catch them); the names it could not fetch are appended to ``missing``."""
    import nltk

    download = nltk.download

    def quiet(info_or_id: Any = None, *args: Any, **kwargs: Any) -> Any:
        ok = download(info_or_id, *args, **{**kwargs, "quiet": True, "print_error_to": io.StringIO()})
        if not ok:
            missing.extend([info_or_id] if isinstance(info_or_id, str) else list(info_or_id or []))
        return ok

    nltk.download = quiet
    try:
        yield
    finally:
        nltk.download = download


def made(env_id: str) -> Any:
    """``ta.make(env_id)``; a game whose NLTK data is missing is :class:`MissingData`."""
    import textarena as ta

    missing: list[str] = []
    try:
        with nltk_quiet(missing):
            return ta.make(env_id)
    except LookupError as e:  # NLTK's "Resource 'words' not found", in a box of asterisks
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
        missing += re.findall(r"Resource '?([\w./-]+?)'? not found", plain)
        if not missing:
            raise
        names = " ".join(dict.fromkeys(missing))
        raise MissingData(f"{env_id} needs NLTK data that is not installed and could not be downloaded ({names}); "
                          f"install it with: python -m nltk.downloader {names} (or set NLTK_DATA to a folder "
                          "that holds it)") from None


def make_env(env_id: str, num_players: int, seed: int, rand: PrivateRandom) -> Any:
    """``ta.make(env_id)`` (its backtracking patterns made linear, :func:`bound_parsers`) reset for
    ``num_players`` with ``seed``, inside ``rand``."""
    with rand.active():
        env = bound_parsers(made(env_id))
        env.reset(num_players=num_players, seed=seed)
    return env


def step_recording(env: Any, text: str) -> tuple[list[str], bool]:
    """Step ``env`` with ``text``; return the reasons of every ``set_invalid_move`` call and ``done``.

    The caller activates the random state. The recorder is an instance attribute on
    TextArena's state, removed again after the step.
    """
    state = env.state
    original = state.set_invalid_move
    reasons: list[str] = []

    def recorder(reason: Any = None, *args: Any, **kwargs: Any) -> Any:
        reasons.append(" ".join(str(reason).split()) or "invalid move")
        return original(reason, *args, **kwargs)

    state.set_invalid_move = recorder
    try:
        done, _ = env.step(text)
    finally:
        del state.set_invalid_move
    return reasons, bool(done)


@dataclass(frozen=True)
class Trial:
    """What TextArena made of a reply: its invalid-move reasons, and its exception if its step raised."""

    reasons: tuple[str, ...]
    error: str | None = None

    @property
    def invalid(self) -> bool:
        return bool(self.reasons)


def _describe(e: Exception) -> str:
    return f"TextArena raised {type(e).__name__}: {' '.join(str(e).split())[:120]}"


def dry_run(env: Any, text: str, rand: PrivateRandom) -> Trial:
    """What TextArena would make of ``text`` now, on a copy: the game and its random state are untouched.

    A step that raises (tic-tac-toe's ``int()`` on a 100,000-digit cell number) is an
    invalid move whose reason names the exception.
    """
    trial = copy.deepcopy(env)
    try:
        with rand.active(keep=False):
            reasons, _ = step_recording(trial, text)
    except Exception as e:  # noqa: BLE001 - TextArena's own bug on this reply; named in the reason and counted
        return Trial((_describe(e),), _describe(e))
    return Trial(tuple(reasons))


def apply(env: Any, text: str, rand: PrivateRandom) -> tuple[Any, Trial]:
    """Step the game with ``text``; return the game after it (a new object) and what TextArena made of it.

    The step runs on a copy that replaces the game only if TextArena does not raise. If it
    raises, the reply gets TextArena's ordinary invalid-move rule on the untouched game:
    ``state.set_invalid_move(reason)`` then ``state.step()`` (the allowance, then the forfeit).
    """
    trial = copy.deepcopy(env)
    before = (rand.py_state, rand.np_state)
    try:
        with rand.active():
            reasons, _ = step_recording(trial, text)
    except Exception as e:  # noqa: BLE001 - as in dry_run
        rand.py_state, rand.np_state = before
        with rand.active():
            env.state.set_invalid_move(_describe(e))
            env.state.step()
        return env, Trial((_describe(e),), _describe(e))
    return trial, Trial(tuple(reasons))


def peek_observation(env: Any, player_id: int) -> str:
    """What TextArena's ``get_observation`` would show ``player_id`` now (read from a copy)."""
    trial = copy.deepcopy(env)
    trial.state.current_player_id = player_id
    _, observation = trial.get_observation()
    if isinstance(observation, str):
        return observation
    # Unwrapped ('-raw') ids give the message list; format it as LLMObservationWrapper does.
    names = getattr(trial.state, "role_mapping", {})
    return "".join(f"\n[{'GAME' if s == -1 else names.get(s, f'Player {s}')}] {m}" for s, m, *_ in observation)
