"""TextArena games as arena games (``textarena_v0``).

Any environment id of TextArena (``textarena`` 0.7.4, offline) plays as an arena
game: ``game: {name: textarena, env_id: KuhnPoker-v0}``. SPIRAL's three games,
``TicTacToe-v0``, ``KuhnPoker-v0`` and ``SimpleNegotiation-v0``, are tested and
have YAMLs beside this file.

What TextArena gives
    The rules, the state, the observation text each player reads (with the
    env id's own wrappers: ``ta.make(env_id)``), the parsing of a reply, its
    verdict on invalid moves (``state.set_invalid_move``) with its allowance
    (``error_allowance``: 1 for SPIRAL's three: one invalid move is forgiven with a
    message to the player, a second in a row ends the game against it), the turn
    limits and the rewards (win +1, loss -1, draw 0 in all three).

What the adapter adds
    Seats, typed observations, arena's invalid-output rule on top of TextArena's,
    per-turn records, seeding without global random state, and the conformance
    kit's guarantees.

Seats
    ``player_0 .. player_{n-1}`` for TextArena's player ids 0..n-1
    (``num_players``, default 2); each seat's role is its seat name, so RAE keeps
    one baseline per player (SPIRAL's role-conditioned baselines).

Episode
    ``reset(seed)`` draws TextArena's seed from the env's generator and resets a
    fresh ``ta.make(env_id)``. Each move TextArena waits for is one public phase
    ``turn`` of the seat TextArena names (``state.current_player_id``); the episode
    ends when TextArena says ``done`` or at ``max_turns`` arena turns (a truncation;
    default 200, retries included). Bounds for SPIRAL's three, in moves TextArena
    accepts: tic-tac-toe 9, Kuhn poker 3 rounds of at most 3 actions, negotiation
    11 (TextArena's ``max_turns`` 10 is checked before each move); each accepted
    move costs at most ``error_allowance + 1`` replies TextArena sees, and each of
    those at most ``invalid.retries + 1`` arena turns.

What a seat sees (the prompt)
    System: ``system_prompt``, by default TextArena's own agents' prompt
    (``STANDARD_GAME_PROMPT``). User: exactly the text TextArena's
    ``get_observation()`` gives that player now: its rules prompt and the game so
    far as the env id's wrappers render it (the full log for tic-tac-toe and Kuhn
    poker; only the game's messages, not the other player's words, for
    SimpleNegotiation). ``TextArenaObservation`` carries that text, the env id,
    the player id and whether it is to move.

Grammar
    TextArena's own. A reply is valid exactly when TextArena's step on it calls
    no ``set_invalid_move`` (tic-tac-toe: ``[k]``, k a free cell; Kuhn poker: the
    first ``[check]``/``[bet]``/``[call]``/``[fold]`` in the reply, which must be legal now; the
    negotiation: any text, where an ``[Offer: ...]`` must be well formed and
    affordable and ``[Accept]`` of an unaffordable offer is invalid). TextArena's
    ``ActionFormattingWrapper`` first puts a reply without brackets in brackets
    (``4`` is ``[4]``). ``parse`` finds the verdict by stepping a deep copy of the
    game (a dry run), so the game is untouched until the phase closes; the reason
    of an invalid reply is TextArena's. A phase is ``free_text`` when TextArena
    takes the empty reply as a move (every negotiation turn); otherwise the empty
    reply is invalid, as the kit checks.

Invalid replies: TextArena's allowance and arena's rule
    Arena's rule (``invalid``) runs first and TextArena's allowance second:

    * ``retry``: arena asks the seat again, up to ``retries`` times, with
      TextArena's reason; TextArena never sees those replies. The last one, if
      still invalid, goes on as below.
    * an invalid reply that arena gives up on (``na``, ``penalty``, or ``retry``
      exhausted) is handed to TextArena, which applies its allowance: within it,
      the same player moves again (a new ``turn``, with TextArena's "attempted an
      invalid move" message in its observation); beyond it, TextArena ends the game
      (the offender -1, the other +1 in two-player games).
    * ``penalty``/``retry`` also book ``invalid.penalty`` on each invalid turn, on
      top of TextArena's rewards (so only ``na`` keeps the game zero-sum).
    * ``error_allowance`` overrides TextArena's allowance (``0``: the first
      invalid move TextArena sees loses).

    Every invalid reply is an invalid arena turn (``Turn.valid``, counted in
    ``infos``); ``textarena_invalid`` counts those TextArena saw.

Rewards
    TextArena's, at the end (``state.rewards``), booked on each seat's last turn;
    trajectory credit (the default estimator, below) gives it to all the seat's
    turns. A seat that never moved (its opponent forfeited on the first move) has
    no turn to book on: PettingZoo's rewards still pay it, and
    ``Episode.rewards`` / ``outcome`` include it. ``zero_sum`` is declared for
    TicTacToe, KuhnPoker and SimpleNegotiation ids (all TextArena outcomes are
    +1/-1 or 0/0); the negotiation keeps TextArena's win/loss by the larger gain
    in inventory value (SPIRAL's signal too), not the gain itself. Other ids are
    not declared zero-sum unless the config says ``zero_sum: true`` (the kit then
    checks it). Metrics: ``forfeit``, ``draw``, ``player_0_won``,
    ``textarena_invalid``, ``textarena_errors``, ``textarena_turns``.

Training defaults
    Phase ``turn``: RAE (SPIRAL's order, alpha 0.95) under trajectory credit.

Randomness
    TextArena draws from the global ``random`` module (``State.__init__`` calls
    ``random.seed``; Kuhn poker shuffles and the negotiation deals with it). The
    adapter keeps TextArena's own ``random`` and ``numpy.random`` states, seeded
    from the env's generator, and swaps them in only around TextArena calls
    (``bridge.PrivateRandom``), restoring the caller's afterwards: a seed replays a
    game exactly and global random state is never touched.

Deviations
    * A reply on which TextArena's step raises (tic-tac-toe's ``int()`` on a cell
      number of 100,000 digits) is invalid with the exception as its reason, and
      TextArena's ``set_invalid_move`` + ``state.step()`` are applied to the
      untouched game (counted in ``textarena_errors``).
    * TextArena's observations are passed on as they are, quirks included (Kuhn
      poker tells the second player its card twice per round).
    * Parsers bounded in time (issue 39). SimpleNegotiation's offer pattern
      backtracks: ``[Offer:`` and 1,600 spaces took 15 s to parse (28 s a step),
      a MB of dots would take hours. The adapter swaps it (``bridge.bound_parsers``)
      for ``bridge.LinearOfferPattern``, which finds the same match (span and offer,
      checked against TextArena's pattern) in linear time; the reply handed to
      TextArena is unchanged, so its verdicts, state and observations are TextArena's
      (a replay test against ``ta.make(env_id)``). TicTacToe's and Kuhn poker's own
      patterns are linear; with this, SPIRAL's three parse any reply up to 1.7 MB in
      well under a second. Other ids run TextArena's parsers as they are.

Version history
    v0: first release (textarena 0.7.4).
"""

from __future__ import annotations

from arena.games.textarena.env import TextArenaGame, env
from arena.games.textarena.types import TextArenaConfig, TextArenaObservation

__all__ = ["TextArenaConfig", "TextArenaGame", "TextArenaObservation", "env"]
