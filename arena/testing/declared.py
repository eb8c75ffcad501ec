"""Rule invariants a game declares, checked by the kit: team zero-sum rewards, and eliminated seats that never act.

* ``team_zero_sum = True`` with :meth:`~arena.core.game_hooks.GameRules.team`: at the end of
  every episode (in ``na`` invalid mode, so no penalty is counted) the seats of one team have
  equal totals and the teams' totals sum to 0: with two teams, one wins what the other loses.
  A reward of the wrong sign for one team breaks it.
* :meth:`~arena.core.game_hooks.GameRules.out_of_game`: a seat the game has eliminated (a dead
  seat) is never asked to move again, in any phase, and never comes back.

:func:`check_declared_invariants` plays games on the seats' example replies and on adversarial
text and checks both after every move; the kit knows no other rules.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from arena.core.game import LLMGame
from arena.testing.invariants import EnvFn
from arena.testing.moves import kit_reset, kit_step


def _na(env_fn: EnvFn) -> LLMGame:
    """The game with invalid output as plain abstention (no penalty in the totals)."""
    probe = env_fn()
    invalid = getattr(probe.config, "invalid", None)
    if invalid is None or invalid.mode == "na":
        return probe
    return type(probe)(probe.config.model_copy(update={"invalid": invalid.model_copy(update={"mode": "na"})}))


def _out(env: LLMGame, seed: int, since: dict[str, str]) -> set[str]:
    out = set(env.out_of_game())
    back = sorted(s for s in since if s not in out)
    now = "at the end" if env.done else f"before {env.agent_selection}'s move in phase {env.phase.name!r} " \
                                          f"(occurrence {env.phase_index})"
    assert not back, (
        f"seed {seed}: {back[0]} came back into the game {now}: out_of_game named it {since[back[0]]}, and an "
        "eliminated seat stays out"
    )
    return out


def _play_checked(env: LLMGame, seed: int, texts: Iterable[str] | None, rng: np.random.Generator) -> None:
    """One game, checking after every move that no eliminated seat is due to move."""
    pool = list(texts) if texts is not None else None
    kit_reset(env, seed)
    since: dict[str, str] = {}  # seat -> when it left the game
    for k in range(10_000):
        if env.done:
            break
        out = _out(env, seed, since)
        for seat in out - since.keys():
            since[seat] = f"out before {env.agent_selection}'s move in phase {env.phase.name!r} " \
                          f"(occurrence {env.phase_index})"
        due = [s for s in env.pending_seats() if s in out]
        assert not due, (
            f"seed {seed}: {due[0]} is out of the game (out_of_game: {since[due[0]]}), but it is asked to move "
            f"in phase {env.phase.name!r} (occurrence {env.phase_index}): an eliminated seat must never act again"
        )
        seat = env.agent_selection
        examples = env.action_space(seat).examples or ("",)
        text = pool[k % len(pool)] if pool else examples[int(rng.integers(len(examples)))]
        kit_step(env, text)
    _out(env, seed, since)


def _check_teams(env: LLMGame, seed: int, how: str) -> None:
    name = env.metadata.get("name", type(env).__name__)
    teams = {s: env.team(s) for s in env.possible_agents}
    missing = [s for s, t in teams.items() if t is None]
    assert not missing, (
        f"{name} declares team_zero_sum, but team({missing[0]!r}) is None (seed {seed}): give every seat a team"
    )
    totals = env.episode().rewards
    by_team: dict[str, list[tuple[str, float]]] = {}
    for seat, team in teams.items():
        by_team.setdefault(str(team), []).append((seat, totals[seat]))
    shown = "; ".join(f"{t}: " + ", ".join(f"{s}={r:.3g}" for s, r in rows) for t, rows in by_team.items())
    for team, rows in by_team.items():
        assert max(r for _, r in rows) - min(r for _, r in rows) <= 1e-9, (
            f"{name} declares team_zero_sum, but the seats of team {team!r} end with different totals (seed {seed}, "
            f"{how}); by team: {shown}"
        )
    total = sum(rows[0][1] for rows in by_team.values())
    assert abs(total) <= 1e-9, (
        f"{name} declares team_zero_sum, but the teams' totals sum to {total:.3g}, not 0 (seed {seed}, {how}); "
        f"by team: {shown}"
    )


def check_declared_invariants(env_fn: EnvFn, seed: int = 0, texts: Iterable[str] | None = None,
                              plays: int = 3) -> None:
    """The invariants the game declares (module docstring), on ``plays`` games of example replies (drawn
    from ``seed``, the first as the other checks draw them) and, when ``texts`` is given, one game of those
    texts cycled."""
    probe = env_fn()
    declares_out = type(probe).out_of_game is not LLMGame.out_of_game
    if not (probe.team_zero_sum or declares_out):
        return
    games = [(None, "on example replies", np.random.default_rng(seed if i == 0 else [seed, i])) for i in range(plays)]
    games += [(list(texts), "on the given texts", np.random.default_rng(seed))] if texts is not None else []
    for pool, how, rng in games:
        env = _na(env_fn)
        _play_checked(env, seed, pool, rng)
        if env.team_zero_sum and not env.episode().truncated:
            _check_teams(env, seed, how)
