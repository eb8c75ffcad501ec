"""The conformance kit every arena game passes; users run it on their own games.

    from arena.testing import check_game
    check_game(lambda: MyGame(), bot=my_bot)

``check_game`` runs PettingZoo's ``api_test`` and ``seed_test`` (on the game
itself, unwrapped) and the generic invariants in :mod:`arena.testing.invariants`:
a seed replays (global random state is named when it does not), any string is a
legal action (adversarial and 100,000-character replies included), a reply nobody
could parse is marked invalid unless its phase is ``free_text``, hidden phases
leak nothing while open and ``sealed`` ones nothing after they close, and
declared zero-sum rewards sum to zero. Declared private information is checked
by :mod:`arena.testing.privacy` and :mod:`arena.testing.draws`: a reply in a
phase with an ``audience`` (or ``addressed``: the reply names its own) reaches no
seat outside it, a secret drawn with ``draw_private`` for one seat reaches no
other, and a joint deal (``deal_private``: roles, cards) reaches each seat's own
value only. Rule invariants a game declares (``team_zero_sum``, ``out_of_game``)
are checked by :mod:`arena.testing.declared`. Whatever the game raises is
reported with the seed, the seat and the phase (:mod:`arena.testing.moves`), and
where the kit could not compare anything it warns (:class:`KitWarning`) rather
than pass in silence. :mod:`arena.testing.strategies` has Hypothesis strategies
for adversarial completions.
"""

from __future__ import annotations

from arena.testing.invariants import (
    EnvFn,
    check_any_text_is_legal,
    check_hidden_information,
    check_hidden_outputs,
    check_pettingzoo_api,
    check_seed_determinism,
    check_seeded_replay,
    check_unparseable_is_invalid,
    check_zero_sum,
    play_texts,
)
from arena.testing.declared import check_declared_invariants
from arena.testing.draws import check_private_draws
from arena.testing.moves import GameRaised, KitWarning
from arena.testing.privacy import check_private_replies
from arena.testing.strategies import ADVERSARIAL, LONG, completions


def check_game(env_fn: EnvFn, bot: object | None = None, seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    """Run the whole kit on one game constructor."""
    from arena.policies.scripted import ScriptedPolicy, random_bot

    for seed in seeds:  # arena's own checks first: their messages name the seat and phase
        check_seed_determinism(env_fn, seed)
        check_any_text_is_legal(env_fn, ADVERSARIAL, seed)
        check_any_text_is_legal(env_fn, LONG, seed)
        check_unparseable_is_invalid(env_fn, seed)
        check_hidden_outputs(env_fn, seed)
        check_hidden_information(env_fn, seed)
        check_private_replies(env_fn, seed)
        check_private_draws(env_fn, seed)
        check_declared_invariants(env_fn, seed, ADVERSARIAL)
        check_zero_sum(env_fn, ADVERSARIAL, seed)
        check_zero_sum(env_fn, env_fn().action_space(env_fn().possible_agents[0]).examples or ("",), seed)
        check_seeded_replay(env_fn, lambda: ScriptedPolicy(bot or random_bot), seed)  # type: ignore[arg-type]
    check_pettingzoo_api(env_fn)


__all__ = [
    "ADVERSARIAL",
    "LONG",
    "EnvFn",
    "GameRaised",
    "KitWarning",
    "check_any_text_is_legal",
    "check_declared_invariants",
    "check_game",
    "check_hidden_information",
    "check_hidden_outputs",
    "check_pettingzoo_api",
    "check_private_draws",
    "check_private_replies",
    "check_seed_determinism",
    "check_seeded_replay",
    "check_unparseable_is_invalid",
    "check_zero_sum",
    "completions",
    "play_texts",
]
