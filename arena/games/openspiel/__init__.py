"""OpenSpiel games as arena games (``openspiel_v0``), with exact exploitability of a model's policy.

Any sequential OpenSpiel game with explicit chance outcomes, by name and
parameters::

    game: {name: openspiel, game: kuhn_poker}                      # or leduc_poker, tic_tac_toe, liars_dice, ...
    game: {name: openspiel, game: liars_dice, params: {numdice: 2}}

Seats
    ``player_0 .. player_{n-1}``: one per OpenSpiel player. A seat's role is its
    seat name, so RAE keeps one baseline per player (SPIRAL's role-conditioned
    advantage).

Episode
    Chance outcomes are drawn from the env's own generator (``reset(seed=s)``),
    each with OpenSpiel's probability. Then each decision is a public phase
    ``move`` with the one seat to act; the episode ends when OpenSpiel's state is
    terminal. The seat sees the rules (a paragraph for Kuhn, Leduc, tic-tac-toe and
    liar's dice, one generic line for other games), its information state as text
    (Kuhn: its card and the betting in words; Leduc: its card's rank, the public
    card, each round's betting by player and the pot in words, parsed from the
    information-state string, suits dropped since they never matter; tic-tac-toe:
    the board; others: OpenSpiel's information-state string verbatim) and the legal
    actions by OpenSpiel's ``action_to_string`` name. ``view`` places a poker card
    (first, last, or in the question), or keeps OpenSpiel's string for every game
    (``view: openspiel``, which shows Leduc's card as a number 0-5: the built-in
    model cannot tell one from another there, bench/RESULTS.md).

Action grammar
    The LAST legal action name the reply mentions, case-insensitive, as a whole
    word (not inside a longer word or number; at one position the longest name
    wins): "I bet" -> Bet, "pass, no, BET" -> Bet. No legal name -> invalid,
    which takes the core's ``invalid`` rule (na / penalty / retry, counted). An
    abstention (an invalid turn with no retry left) plays a uniformly random legal
    action drawn from the env's generator (``game/invalid_rate`` counts them).

Action modes (``action_mode``)
    ``generate`` (the default): a model seat writes a reply, read by the grammar
    above. ``score``: the seat's request carries its legal action names
    (``Request.choices``) and the model does not generate: each name ``a_i`` is
    scored as the whole reply (its tokens and end of sequence), ``l_i`` its
    log-likelihood at the seat's sampling temperature, and ``a_i`` is drawn with
    probability ``softmax(l)_i`` from a generator seeded by the request's seed
    (arena/policies/choices.py; backend hf, any other is refused at start-up). The
    completion, the text it trains on, is ``a_i`` itself, so no turn is invalid.
    Which policy the exact exploitability measures: in ``score`` mode it is the
    policy that plays; in ``generate`` mode it is not: it is the policy the model
    would play if every reply were exactly a legal name, while the replies that
    name none play the fallback above.

Rewards
    OpenSpiel's ``returns()`` at the terminal state, booked on each seat's last
    turn (so ``credit: trajectory`` or the last turn's reward are the same
    return). A seat that never moved has no turn to book on: its return is still
    its outcome score. ``zero_sum`` is the game's declared utility (ZERO_SUM).

What OpenSpiel gives and what the adapter adds
    OpenSpiel: rules, chance distributions, legal actions and their names,
    information-state strings, returns, the CFR+ solver and exact best responses
    (``exploitability.nash_conv``). The adapter: seats, prompts, the reply
    grammar, invalid handling, seeding from the env's generator, the bots
    ``random`` / ``cfr`` (arena/games/openspiel/bots.py), and the policy a language
    model defines (``policy_metrics``, arena/games/openspiel/exact.py): at each
    information state, each legal action's probability is the model's teacher-forced
    likelihood of that action's name as the whole reply, normalised over the legal
    actions, at the sampling temperature (arena/loop/exact.py).

Deviations
    Simultaneous-move games and games that sample chance internally are refused
    (one line). Exploitability needs every information state enumerated:
    ``exploitability_max_states`` (default 20,000) bounds it.

Version history
    v0: first release; ``action_mode`` added later (its default, ``generate``, plays as before).
"""

from __future__ import annotations

from arena.games.openspiel.env import OpenSpielGame, env
from arena.games.openspiel.types import OpenSpielConfig, OpenSpielObservation

__all__ = ["OpenSpielConfig", "OpenSpielGame", "OpenSpielObservation", "env"]
