"""Checks of declared private information: replies addressed to some seats, secrets drawn for one seat, joint deals.

Each varies one thing and replays the game on the same seed and the same completions
otherwise, comparing what every seat that must not know sees, move by move:

* :func:`check_private_replies`: in a phase with ``Phase(..., audience=...)`` or
  ``Phase(..., addressed=True)`` (each reply names its own audience), one writer's reply
  is replaced; no seat outside its audience may see a difference until the episode
  ends (in the final views too with ``sealed="forever"``).
* :func:`arena.testing.draws.check_private_draws`: every value drawn with
  :meth:`~arena.core.game.LLMGame.draw_private` for one seat, and every joint deal of
  :meth:`~arena.core.game.LLMGame.deal_private`, is drawn again.

Anything a seat sees that depends on the varied value counts, raw text or parsed
values or their consequences (an accepted offer announced to all is a leak).

**The course of play.** Two games are compared only where they run the same course: the
same phases in the same order, the same seat to move (a reply check) or the same number of
moves per phase (a secret check, where who moves may be the secret). A varied reply that
changes the course (a night kill names another victim, so other seats talk next) is compared
with the game as played only while the reply's phase is still open; the kit then tries the
writer's other example replies, and then the same reply reworded (a note added, so the parsed
action stays the same): this checks the raw text over the whole game, while the parsed
value's consequences are public by the game's own rules. When no whole game could be compared
the kit warns (:class:`~arena.testing.moves.KitWarning`), never passes silently.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import numpy as np

from arena.core.game import LLMGame, Phase
from arena.testing.invariants import EnvFn, GlobalRandomWatch, _example_texts
from arena.testing.moves import KitWarning
from arena.testing.replay import _changes, _confirm, _Moment, _trace


def _rewordings(text: str) -> Iterator[str]:
    """The same reply in other words: a note after it, before it, or a space (most parsers read past them)."""
    yield f"{text}\n(QZX a note)"
    yield f"(QZX a note)\n{text}"
    yield f"{text} "


def _alternatives(env: LLMGame, writer: str, text: str) -> Iterator[tuple[str, bool]]:
    """(another reply, whether it is the same reply reworded): the writer's other examples, then rewordings."""
    for example in dict.fromkeys(env.action_space(writer).examples or ()):
        if example != text:
            yield example, False
    if not env.action_space(writer).examples:
        yield text + " (something else)", False
    for reworded in _rewordings(text):
        yield reworded, True


def _same_action(a: LLMGame, b: LLMGame, idx: Sequence[int]) -> bool:
    return all((a.turns[i].valid, a.turns[i].action) == (b.turns[i].valid, b.turns[i].action) for i in idx)


def check_private_replies(env_fn: EnvFn, seed: int = 0) -> None:
    """In a phase with an ``audience`` (or ``addressed``), what a seat outside a writer's audience sees cannot
    depend on its reply.

    For each writer in each such phase occurrence, the game is replayed with that
    writer's reply replaced (every other completion and the seed the same), and every
    seat outside its audience (in either game: a reply may name its own) is compared
    with the game as played at every move from the reply until the episode ends (and in
    the final views when the phase is ``sealed="forever"``). Raw text and parsed values
    are both caught; a consequence shown to all (an accepted offer announced) counts too.
    A replacement that changes the course of play is compared only while the reply's phase is open, and the
    next one is tried (module docstring).
    """
    watch = GlobalRandomWatch()
    env = env_fn()
    steps = _example_texts(env, np.random.default_rng(seed), seed)
    replies: dict[tuple[str, int, str], list[int]] = {}
    for i, (seat, _, (name, occurrence), phase) in enumerate(steps):
        if phase.kept_until and (phase.audience is not None or phase.addressed):
            replies.setdefault((name, occurrence, seat), []).append(i)
    if not replies:
        return
    texts = [t for _, t, _, _ in steps]
    played, played_env = _trace(env_fn(), seed, texts, start=min(i for idx in replies.values() for i in idx) + 1)
    for (name, occurrence, writer), idx in replies.items():
        phase: Phase = steps[idx[0]][3]
        what = f"phase {name!r} (occurrence {occurrence})"
        audience = played_env.reply_seen_by(name, occurrence, writer) or ()
        unknown = sorted(set(audience) - set(env.possible_agents))
        assert not unknown, (
            f"seed {seed}: {what}: the audience of {writer} names {', '.join(unknown)}, not seats "
            f"of this game ({', '.join(env.possible_agents)})"
        )
        if all(v == writer or v in audience for v in env.possible_agents):
            continue
        compared = _compare_reply(env_fn, seed, texts, idx, played, played_env, writer, phase, what, watch)
        if not compared:
            warnings.warn(KitWarning(
                f"seed {seed}: the kit could not fully check {what}'s reply of {writer}: every other reply it "
                "tried, and the same reply reworded, changed the course of play (or how the reply parsed), so it "
                "was compared only while its phase was open; give action_examples that keep the course"
            ), stacklevel=2)
    watch.check(f"seed {seed}, the private-reply check's replays")


def _open_until(moments: list[_Moment], key: tuple[str, int], after: int) -> int:
    """The first move after ``after`` at which phase occurrence ``key`` has closed."""
    return next((k for k in range(after + 1, len(moments)) if moments[k].where[:2] != key), len(moments))


def _compare_reply(env_fn: EnvFn, seed: int, texts: list[str], idx: list[int], played: list[_Moment],
                   played_env: LLMGame, writer: str, phase: Phase, what: str, watch: GlobalRandomWatch) -> bool:
    """Replace ``writer``'s reply (at ``idx``) by each alternative in turn until one keeps the course; raise on a
    leak. An alternative that changes the course is compared only while the reply's phase is still open (nothing
    has followed from it yet). Returns whether a whole game could be compared."""
    key = (phase.name, played_env.turns[idx[0]].phase_index)
    for alternative, reworded in _alternatives(played_env, writer, texts[idx[0]]):
        swapped = [alternative if i in idx else t for i, t in enumerate(texts)]
        other, other_env = _trace(env_fn(), seed, swapped, start=idx[0] + 1)
        apart = next((k for k, (a, b) in enumerate(zip(played, other)) if a.where != b.where), None)
        if apart is None and len(other) != len(played):
            apart = min(len(other), len(played))
        if reworded and apart is None and not _same_action(played_env, other_env, idx):
            continue  # not the same reply after all
        upto = None if apart is None else min(apart, _open_until(played, key, idx[0]), _open_until(other, key, idx[0]))
        seen_by = {*(played_env.reply_seen_by(*key, writer) or ()), *(other_env.reply_seen_by(*key, writer) or ())}
        blind = [v for v in played_env.possible_agents if v != writer and v not in seen_by]
        changed = _changes(played, other, blind, final=phase.kept_until == "forever", upto=upto)
        if changed:
            viewer, k = min(changed.items(), key=lambda kv: (kv[1], played_env.possible_agents.index(kv[0])))
            _confirm(env_fn, seed, texts, k, viewer, played[k].views[viewer], what, watch)
            open_now = played[k].where[:2] == key
            raise AssertionError(
                f"seed {seed}: {what} shows {writer}'s reply only to {', '.join(sorted(seen_by)) or 'nobody else'}, "
                f"but what {viewer} sees changes with it {played[k].label}"
                + (", while the phase is open" if open_now else ", after the phase closed")
                + (" (the reply reworded, its parsed action the same: the raw text leaks)" if reworded else "")
                + ": the reply (or a value parsed from it, or a consequence of it) reaches a seat outside its audience"
            )
        if apart is None:
            return True
    return False


def __getattr__(name: str) -> object:
    """``check_private_draws`` lived here before #53; it is :func:`arena.testing.draws.check_private_draws`."""
    if name == "check_private_draws":
        from arena.testing.draws import check_private_draws

        return check_private_draws
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
