"""Does a poker policy use its card? The played policy against its own card-blind projection.

A Kuhn or Leduc policy can be far below uniform play's exploitability without reading its private card: always
call is 1.4667 on Leduc, and every card-blind Kuhn policy is >= 1/3. This scores a config's played policy exactly
(``arena.eval exploitability``'s ``evaluate``), groups the information states that differ only in the private card
(Kuhn: the same betting; Leduc: the same player, betting and public card), and prints:

- the exploitability of the policy, and of its **card-blind projection**: each state's action probabilities
  replaced by the plain mean over its group (a policy that cannot see the card). A policy that uses its card
  well is less exploitable than its projection; one that ignores it scores the same;
- the **spread**: per group and action, the largest minus the smallest probability across its cards, averaged over
  groups (0: card-blind), and the share of groups whose most likely action differs between cards;
- whether the policy is pure (every probability within 1e-3 of 0 or 1).

In score mode (``action_mode: score``) the played policy is the exact one. In free generation it is the
exact-text played policy (an invalid reply's share played by the fallback), as ``arena.eval exploitability``
computes it.

    .venv/bin/python bench/card_dependence.py games/openspiel/leduc.ed.yaml \\
        --set policies.learner.model=runs/leduc_ed/checkpoints/step_000008/model
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from arena.core.errors import ConfigError, OneLineParser

#: The games whose private card this bench can take out of an information state (:func:`card_group`).
GAMES = ("kuhn_poker", "leduc_poker")


def card_group(game_name: str, info_state: str) -> str:
    """The information state without its private card: Kuhn's leading digit, Leduc's ``[Private: c]``."""
    if game_name == "kuhn_poker":
        return info_state[1:]
    return re.sub(r"\[Private: \d+\]", "", info_state)


def card_groups(rows: Sequence[tuple[str, dict[str, float]]], game_name: str) -> dict[str, list[dict[str, float]]]:
    """The rows' action probabilities by card group (:func:`card_group`), in row order."""
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for state, probs in rows:
        groups[card_group(game_name, state)].append(probs)
    return groups


def blind_projection(rows: Sequence[tuple[str, dict[str, float]]], game_name: str
                     ) -> list[tuple[str, dict[str, float]]]:
    """Each row's probabilities replaced by the plain mean over the rows of its card group (module docstring)."""
    mean = {g: {a: sum(p[a] for p in ps) / len(ps) for a in ps[0]} for g, ps in card_groups(rows, game_name).items()}
    return [(state, dict(mean[card_group(game_name, state)])) for state, _ in rows]


def spread(rows: Sequence[tuple[str, dict[str, float]]], game_name: str) -> tuple[float, float]:
    """(mean over groups of the largest max-min probability gap over actions, share of groups whose argmax differs)."""
    groups = card_groups(rows, game_name).values()
    gaps = [max(max(p[a] for p in ps) - min(p[a] for p in ps) for a in ps[0]) for ps in groups]
    differ = sum(len({max(p, key=p.get) for p in ps}) > 1 for ps in groups)
    return sum(gaps) / len(gaps), differ / len(gaps)


def exploitability_of_rows(game: Any, rows: Sequence[tuple[str, dict[str, float]]]) -> float:
    """OpenSpiel's exploitability of the tabular policy given per information state (rows in any order);
    ``game`` is a ``pyspiel.Game`` (the config's, with its parameters) or a game name."""
    import pyspiel
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability

    game = pyspiel.load_game(game) if isinstance(game, str) else game
    table = os_policy.TabularPolicy(game)
    by_state = dict(rows)
    for i, state in enumerate(table.states):
        player = state.current_player()
        probs = by_state[state.information_state_string(player)]
        table.action_probability_array[i] = 0.0
        for a in state.legal_actions():
            table.action_probability_array[i][a] = probs[state.action_to_string(player, a)]
    return float(exploitability.exploitability(game, table))


def check_game(cfg: Any) -> str:
    """The config's OpenSpiel game name, or a one-line ConfigError saying which games this bench measures
    (a private card to take out, and an exploitability: two players, zero-sum)."""
    from arena.games.openspiel.types import OpenSpielConfig

    settings = cfg.game.settings
    if isinstance(settings, OpenSpielConfig) and settings.game in GAMES and settings.load().num_players() == 2:
        return settings.game
    what = f"OpenSpiel's {settings.load()}" if isinstance(settings, OpenSpielConfig) else repr(cfg.game.name)
    raise ConfigError(f"game: card dependence is measured on two-player {' and '.join(GAMES)} (game.name: openspiel, "
                      f"game.game: one of them, with parameters that keep two players); {what} is not one")


def main(argv: Sequence[str] | None = None) -> int:
    from arena.loop.config import load_config
    from arena.rank.exploitability import evaluate

    p = OneLineParser(prog="bench/card_dependence.py", description=__doc__.split("\n")[0])
    p.add_argument("config", help="a config of an OpenSpiel game: two-player kuhn_poker or leduc_poker")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    game_name = check_game(cfg)
    game = cfg.game.settings.load()
    rows: list[tuple[str, dict[str, float]]] = []
    values = evaluate(cfg, table=rows)
    played = values.get("exploitability_played", values["exploitability"])
    own = exploitability_of_rows(game, rows)
    blind = exploitability_of_rows(game, blind_projection(rows, game_name))
    gap, differ = spread(rows, game_name)
    pure = all(min(v, 1 - v) < 1e-3 for _, probs in rows for v in probs.values())
    print(f"{game_name}: {len(rows)} information states, {len(card_groups(rows, game_name))} card groups")
    print(f"exploitability, played: {played:.4f} (recomputed from the table: {own:.4f})")
    print(f"exploitability, its card-blind projection: {blind:.4f}")
    print(f"spread across cards: mean largest gap {gap:.3f}; groups whose most likely action differs {differ:.2f}")
    print(f"pure: {pure}")
    return 0


if __name__ == "__main__":
    from arena.cli import run_cli

    run_cli(main)
