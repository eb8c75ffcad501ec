"""Pure rules of the OpenSpiel adapter: loading a game, rendering a state for one player, parsing a reply.

Nothing here holds episode state; the env (``arena/games/openspiel/env.py``) wires these into PettingZoo.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from arena.core.game_types import Invalid

#: Short rules for the games the adapter knows; any other game gets a generic line.
RULES = {
    "kuhn_poker": (
        "Kuhn poker, two players. The deck has three cards: Jack < Queen < King. Each player antes 1 chip and is "
        "dealt one private card. Player 0 acts first. 'Pass' checks (or folds when facing a bet); 'Bet' puts 1 more "
        "chip in (or calls a bet). If one player bets and the other passes, the bettor wins the pot. Otherwise the "
        "higher card wins the pot at showdown. Your score is the chips you win or lose."
    ),
    "leduc_poker": (
        "Leduc poker, two players. The deck has six cards: two Jacks, two Queens, two Kings (ranks J < Q < K). "
        "Each player antes 1 chip and gets one private card. There are two betting rounds (raise size 2 in the "
        "first, 4 in the second, at most two raises a round); after the first a public card is revealed. "
        "'Fold' gives up the pot, 'Call' matches the current bet (checks when there is none), 'Raise' bets more. "
        "At showdown a pair with the public card wins, else the higher card. Your score is the chips you win or lose."
    ),
    "tic_tac_toe": (
        "Tic-tac-toe on a 3x3 board. Player 0 plays x, player 1 plays o; players alternate placing their mark "
        "on an empty cell, written mark(row,column) with rows and columns 0..2. Three in a row, column or "
        "diagonal wins (+1, the loser -1); a full board is a draw (0)."
    ),
    "liars_dice": (
        "Liar's dice. Each player rolls dice in secret. Players take turns bidding 'count-face': a claim that at "
        "least count dice among ALL players show that face (6 is wild). Each bid must be higher than the last. "
        "Instead of bidding you may call 'Liar' on the previous bid: if the bid holds, the caller loses (-1), "
        "else the bidder loses (-1); the winner gets +1."
    ),
}

KUHN_CARDS = ("Jack", "Queen", "King")
KUHN_MOVES = {"p": "Pass", "b": "Bet"}
#: Leduc poker's ranks, low to high (OpenSpiel's card c has rank c // 2: two suits a rank), and its actions.
LEDUC_RANKS = ("Jack", "Queen", "King", "Ace")
LEDUC_MOVES = ("Fold", "Call", "Raise")
_LEDUC = re.compile(r"\[Observer: \d+\]\[Private: (\d+)\]\[Round (\d)\]\[Player: \d+\]\[Pot: (\d+)\]"
                    r"\[Money: [\d ]+\](?:\[Public: (\d+)\])?\[Round1: ([\d ]*)\]\[Round2: ([\d ]*)\]")


class GameLoadError(ValueError):
    """An unknown OpenSpiel game, or parameters it rejects (one line)."""


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """OpenSpiel's C++ error handler prints the error to file descriptor 2 before raising: keep it off."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


def params_key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


@lru_cache(maxsize=64)
def _load(name: str, params: tuple[tuple[str, Any], ...]) -> Any:
    import pyspiel

    if name not in pyspiel.registered_names():
        near = [n for n in pyspiel.registered_names() if name[:3] and n.startswith(name[:3])]
        hint = f"; close: {', '.join(near[:6])}" if near else ""
        raise GameLoadError(f"unknown OpenSpiel game {name!r} (pyspiel.registered_names() lists {len(pyspiel.registered_names())}, "
                            f"e.g. kuhn_poker, leduc_poker, tic_tac_toe, liars_dice{hint})")
    spec = next(g for g in pyspiel.registered_games() if g.short_name == name).parameter_specification
    wraps = [k for k, default in spec.items() if isinstance(default, dict)]  # a parameter whose value is a game
    if wraps:
        raise GameLoadError(f"{name} wraps another game (parameter {', '.join(map(repr, wraps))}); the adapter loads "
                            "games by name only: name the wrapped game itself in game.game")
    for key, value in params:
        if key not in spec:
            raise GameLoadError(f"{name} has no parameter {key!r}; known: {', '.join(sorted(spec)) or 'none'}")
        default = spec[key]
        if type(value) is not type(default) and not (isinstance(default, float) and type(value) is int):
            raise GameLoadError(f"{name} parameter {key}={value!r}: expected {type(default).__name__} "
                                f"(default {default!r})")
    try:
        with _quiet_stderr():
            game = pyspiel.load_game(name, {k: float(v) if isinstance(spec[k], float) else v for k, v in params})
    except (pyspiel.SpielError, LookupError, RuntimeError) as e:  # nfg_game with no file: IndexError
        raise GameLoadError(f"{name} rejects params {dict(params)}: {' '.join(str(e).split()) or type(e).__name__}") from None
    kind = game.get_type()
    if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise GameLoadError(f"{name} is a simultaneous-move game; the adapter plays sequential games only")
    if not (kind.provides_information_state_string or kind.provides_observation_string):
        raise GameLoadError(f"{name} provides neither information-state nor observation strings to render")
    if kind.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC:
        raise GameLoadError(f"{name} samples chance internally; the adapter needs explicit chance outcomes")
    try:  # parameters OpenSpiel accepts but cannot play (liars_dice with numdice 0): fail here, in one line
        with _quiet_stderr():
            _first_move(game)
    except pyspiel.SpielError as e:
        raise GameLoadError(f"{name} with params {dict(params)} cannot be played: {' '.join(str(e).split())[:300]}") from None
    return game


def _first_move(game: Any) -> None:
    """Play the first chance outcomes until a player is to move, and list that player's legal actions."""
    state = game.new_initial_state()
    for _ in range(10_000):
        if state.is_terminal():
            return
        if not state.is_chance_node():
            state.legal_actions(state.current_player())
            return
        state.apply_action(state.chance_outcomes()[0][0])


def load_game(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """The ``pyspiel.Game`` for ``name`` and ``params``, cached; :class:`GameLoadError` with one line otherwise."""
    return _load(name, params_key(params or {}))


def resolve_chance(state: Any, rng: np.random.Generator) -> None:
    """Apply chance outcomes drawn from ``rng`` (the env's own generator) until a player moves or the game ends."""
    while state.is_chance_node():
        outcomes = state.chance_outcomes()
        probs = np.array([p for _, p in outcomes], dtype=float)
        index = int(rng.choice(len(outcomes), p=probs / probs.sum()))
        state.apply_action(outcomes[index][0])


def legal_names(state: Any, player: int) -> list[str]:
    """OpenSpiel's ``action_to_string`` of each legal action, in ``legal_actions`` order."""
    return [state.action_to_string(player, a) for a in state.legal_actions(player)]


def info_state(state: Any, player: int) -> str:
    """OpenSpiel's information-state string (or the observation string where the game has none)."""
    if state.get_game().get_type().provides_information_state_string:
        return str(state.information_state_string(player))
    return str(state.observation_string(player))


def kuhn_parts(state: Any, player: int) -> tuple[str, str] | None:
    """Kuhn poker's view in words: (the card, the betting so far); None for another game's string."""
    raw = info_state(state, player)
    if not (raw[:1].isdigit() and set(raw[1:]) <= set("pb")):
        return None
    card = KUHN_CARDS[int(raw[0])] if int(raw[0]) < len(KUHN_CARDS) else f"card {raw[0]}"
    moves = [f"Player {i % state.get_game().num_players()}: {KUHN_MOVES[m]}" for i, m in enumerate(raw[1:])]
    return card, "; ".join(moves) if moves else "no moves yet"


def leduc_rank(card: int) -> str:
    """The name of OpenSpiel's Leduc card ``card`` (its rank, ``card // 2``; suits never matter in Leduc): Jack to
    Ace (an Ace with 3 players), then ``rank r`` (more players: higher ranks win)."""
    rank = card // 2
    return LEDUC_RANKS[rank] if rank < len(LEDUC_RANKS) else f"rank {rank}"


def leduc_parts(state: Any, player: int) -> tuple[str, str] | None:
    """Leduc poker's view in words: (the private card's rank, the public card and each round's betting and the
    pot), parsed from the information-state string alone, so every state of one information set reads the same.
    Who made each move comes from the public action history. None for another game's string."""
    m = _LEDUC.fullmatch(info_state(state, player))
    if m is None:
        return None
    private, round_, pot, public, *rounds = m.groups()
    movers = iter(a.player for a in state.full_history() if a.player >= 0)
    said = []
    for number, moves in enumerate(rounds, start=1):
        if number > int(round_):
            break
        words = [f"Player {next(movers)}: {LEDUC_MOVES[int(a)]}" for a in moves.split()]  # OpenSpiel's ids 0-2
        said.append(f"Round {number}: {'; '.join(words) if words else 'no moves yet'}.")
    board = f"Public card: {leduc_rank(int(public))}." if public else "Public card: not dealt yet (after round 1)."
    return leduc_rank(int(private)), f"{board} {' '.join(said)} Pot: {pot} chips."


def card_parts(game_name: str, state: Any, player: int) -> tuple[str, str] | None:
    """(the seat's private card in words, the rest of its view) where the game has a named card (Kuhn, Leduc)."""
    if state.is_chance_node():
        return None
    if game_name == "kuhn_poker":
        return kuhn_parts(state, player)
    return leduc_parts(state, player) if game_name == "leduc_poker" else None


def card_and_view(game_name: str, state: Any, player: int, style: str) -> tuple[str, str]:
    """(the seat's private card in words, or "" where the game has none or ``style`` is ``openspiel``; the
    player's view as text: OpenSpiel's own string, in plain words for Kuhn and Leduc poker, the rest alone when
    ``style`` puts the card elsewhere in the prompt, :func:`prompt_text`). One parse for both."""
    parts = card_parts(game_name, state, player) if style != "openspiel" else None
    if parts is not None:
        card, rest = parts
        if game_name == "kuhn_poker":
            rest = f"Betting so far: {rest}."
        return card, f"Your card: {card}. {rest}" if style == "card_first" else rest
    if game_name == "tic_tac_toe" and state.get_game().get_type().provides_observation_string:
        return "", f"Board (rows 0-2, columns 0-2; '.' is empty):\n{state.observation_string(player)}"
    return "", f"Your information state (OpenSpiel's string): {info_state(state, player)}"


def describe(game_name: str, state: Any, player: int, style: str = "card_first") -> str:
    """The player's view as text (:func:`card_and_view`); ``style`` ``openspiel`` keeps OpenSpiel's string for
    every game."""
    return card_and_view(game_name, state, player, style)[1]


def rules_text(game_name: str) -> str:
    return RULES.get(game_name, f"The OpenSpiel game {game_name}. Win as many points as you can.")


def prompt_text(game_name: str, player: int, view: str, legal: Sequence[str], card: str = "",
                style: str = "card_first") -> str:
    """The user message. ``style`` (Kuhn and Leduc poker, ``OpenSpielConfig.view``): card_first, the card in ``view``;
    card_last, ``Your card: <card>.`` as the last line; card_in_question, ``You hold the <card>.`` in the question."""
    choices = ", ".join(legal)
    ask = "Reply with exactly one legal action and nothing else."
    if card and style == "card_last":
        return f"You are player {player}.\n{view}\nLegal actions: {choices}.\n{ask}\nYour card: {card}."
    if card and style == "card_in_question":
        return f"You are player {player}.\n{view}\nLegal actions: {choices}.\nYou hold the {card}. {ask}"
    return f"You are player {player}.\n{view}\nLegal actions: {choices}.\n{ask}"


def _trie(names: Sequence[str]) -> str:
    """One regex matching any of ``names`` (then no word character), as a trie: at a position it tests each
    character once per branch, not once per name."""
    root: dict[str | None, Any] = {}
    for name in names:
        node = root
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = {}

    def emit(node: dict[str | None, Any]) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in node.items() if ch is not None]
        if None in node:
            alts.append(r"(?!\w)")
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return emit(root)


@lru_cache(maxsize=4096)
def _last_mention(legal: tuple[str, ...]) -> re.Pattern[str]:
    # Greedy ``.*`` backs off from the end of the reply one position at a time, so the first match found is
    # the last position where some name starts: one linear pass, however many names are legal (the
    # per-name searches it replaces took 3.9 s on a 1.7 MB reply with liar's dice's 60 bids; issue 39).
    return re.compile(r"(?s:.*)(?<!\w)(" + _trie(legal) + ")", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _name_here(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name) + r"(?!\w)", re.IGNORECASE)


def parse_action(text: str, legal: Sequence[str]) -> int | Invalid:
    """Index into ``legal`` of the LAST legal name the reply mentions (case-insensitive, whole words:
    not inside a longer word or number; mentions may overlap, "1-1-2" mentions 1-2 last); at one position
    the longest name wins, then the first in ``legal``. None -> :class:`Invalid`. Linear in the reply."""
    last = _last_mention(tuple(legal)).match(text) if legal else None
    if last is None:
        shown = ", ".join(legal[:12]) + (", ..." if len(legal) > 12 else "")
        return Invalid(reason=f"no legal action named (legal: {shown})")
    start = last.start(1)
    here = [(len(name), -index) for index, name in enumerate(legal) if _name_here(name).match(text, start)]
    return -max(here, default=(0, 0))[1]  # never empty: the name the trie matched is among them


def is_zero_sum(game: Any) -> bool:
    """The game's declared utility is zero-sum (OpenSpiel's ``GameType.utility``)."""
    import pyspiel

    return bool(game.get_type().utility == pyspiel.GameType.Utility.ZERO_SUM)
