"""The check of drawn secrets: a value drawn for one seat (:meth:`~arena.core.game.LLMGame.draw_private`) and a
joint deal (:meth:`~arena.core.game.LLMGame.deal_private`: roles, cards from one deck) reach their own seats only.

The game is replayed on the same seed and the same completions with the secret drawn again
from another generator. A seat that did not draw it (a single draw), or whose dealt value
came out the same (a deal), must see no difference. Who moves may itself be the secret (the
werewolf acts at night), so the redrawn game is fed the same completions move by move and
counts as running the same course when it goes through the same phases with the same number
of moves each, whoever makes them:

* a redraw that keeps the course is compared at every move until the episode ends (a seat
  the rules show the secret to, declared with ``reveal_private``, only until then);
* one that changes it (the werewolf now names itself, so nobody dies) is compared only
  before the first phase closes, where nothing depends on the moves yet.

A redraw can repeat the value it replaces, or change the course every time; up to ``tries``
generators are used, until enough of them changed what the secret's own seats see while
keeping the course. When none did, the kit warns (:class:`~arena.testing.moves.KitWarning`):
it passed, but it compared less than a whole game.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from arena.core.game import LLMGame
from arena.testing.invariants import EnvFn, GlobalRandomWatch, _example_texts
from arena.testing.replay import _changes, _confirm, _Moment, _trace

#: Redraws that keep the course and change what the secret's seats see: enough to stop trying.
ENOUGH = {"draw": 1, "deal": 3}


def _first_close(moments: Sequence[_Moment]) -> int:
    """The first move at which the opening phase occurrence has closed (or the game ended)."""
    return next((k for k, m in enumerate(moments) if m.course != moments[0].course), len(moments))


def _divergence(a: Sequence[_Moment], b: Sequence[_Moment]) -> int | None:
    """The first move at which the two games run different courses (None: the same course throughout)."""
    for k, (x, y) in enumerate(zip(a, b)):
        if x.course != y.course:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def _dealt(env: LLMGame) -> dict[str, str]:
    return {seat: repr(values) for seat, values in env.private_dealt.items()}


def _told(envs: Sequence[LLMGame], owners: set[str]) -> dict[str, int]:
    """Seat -> the first move from which the rules show it an owner's value (:meth:`LLMGame.reveal_private`)."""
    first: dict[str, int] = {}
    for env in envs:
        for k, owner, seat in env.private_reveals:
            if owner in owners:
                first[seat] = min(k, first.get(seat, k))
    return first


def _watch(played: list[_Moment], other: list[_Moment], watchers: Sequence[str], upto: int | None,
           told: dict[str, int]) -> dict[str, int]:
    """The first move at which each watcher's view differs, before ``upto`` and before the rules showed it
    the varied value."""
    found: dict[str, int] = {}
    for viewer in watchers:
        limit = min(x for x in (upto, told.get(viewer), len(played)) if x is not None)
        found |= _changes(played, other, [viewer], final=False, upto=limit)
    return found


def check_private_draws(env_fn: EnvFn, seed: int = 0, tries: int = 12) -> None:
    """No seat's view depends on a secret drawn for another seat (``draw_private``) or dealt to another seat
    (``deal_private``); see the module docstring for which replays are compared, and when the kit warns."""
    watch = GlobalRandomWatch()
    env = env_fn()
    steps = _example_texts(env, np.random.default_rng(seed), seed)
    secrets: list[str | None] = [s for s in env.possible_agents if s in env.private_seats]  # None: the deals
    secrets += [None] if env.private_dealt else []
    if not secrets:
        return
    texts = [t for _, t, _, _ in steps]
    played, played_env = _trace(env_fn(), seed, texts, start=0)
    dealt = _dealt(played_env)
    for number, secret in enumerate(secrets):
        what = f"{secret}'s private draw" if secret is not None else "the private deal"
        full = partial = 0
        for attempt in range(tries):
            redrawn = env_fn()
            rng = np.random.default_rng([seed, number, attempt])
            if secret is None:
                redrawn.kit_redeal = rng
            else:
                redrawn.kit_redraw = (secret, rng)
            other, other_env = _trace(redrawn, seed, texts, start=0)
            if secret is None:
                again = _dealt(other_env)
                owners = {s for s in {*dealt, *again} if dealt.get(s) != again.get(s)}
            else:
                owners = {secret}
            if not owners:
                continue  # the same deal again
            apart = _divergence(played, other)
            upto = None if apart is None else min(apart, _first_close(played), _first_close(other))
            watchers = [v for v in played_env.possible_agents if v not in owners]
            leaks = _watch(played, other, watchers, upto, _told([played_env, other_env], owners))
            if leaks:
                _report(env_fn, seed, texts, played, leaks, secret, owners, what, watch)
            if _changes(played, other, sorted(owners), final=False, upto=upto):
                full, partial = full + (apart is None), partial + 1
            if full >= ENOUGH["draw" if secret is not None else "deal"]:
                break
        if not full:
            warnings.warn(_cannot_check(seed, what, tries, partial), stacklevel=2)
    watch.check(f"seed {seed}, the private-draw check's replays")


def _report(env_fn: EnvFn, seed: int, texts: Sequence[str], played: list[_Moment], leaks: dict[str, int],
            secret: str | None, owners: set[str], what: str, watch: GlobalRandomWatch) -> None:
    seats = played[0].views.keys()
    order = list(seats)
    viewer, k = min(leaks.items(), key=lambda kv: (kv[1], order.index(kv[0])))
    _confirm(env_fn, seed, texts, k, viewer, played[k].views[viewer], what, watch)
    if secret is not None:
        raise AssertionError(
            f"seed {seed}: what {viewer} sees changes when only {secret}'s private draw (draw_private) is drawn "
            f"again, {played[k].label}: {secret}'s secret (or a value computed from it) reaches another seat"
        )
    raise AssertionError(
        f"seed {seed}: what {viewer} sees changes when the private deal (deal_private) is dealt again, though "
        f"{viewer}'s own dealt value is the same ({', '.join(sorted(owners))} got other values), {played[k].label}: "
        "another seat's dealt value (or a value computed from it) reaches it"
    )


def _cannot_check(seed: int, what: str, tries: int, partial: int) -> Warning:
    from arena.testing.moves import KitWarning

    compared = (f"{partial} of them only before the first phase closed" if partial else
                "none of them changed what the secret's own seats see")
    return KitWarning(
        f"seed {seed}: the kit could not fully check {what}: of {tries} redraws, none kept the course of play "
        f"(the same phases, the same number of moves each) while changing the secret; {compared}. Nothing leaked "
        "where it compared; give action_examples that keep the course whatever the secret (a move that stays "
        "legal for every role), or more tries (check_private_draws(..., tries=))"
    )
