"""Names -> classes for games, policies and learners, imported only when used.

Built-in names map to ``"module:attribute"`` strings; any ``"module:attribute"``
string is accepted too, so users register a game by pointing at it. A package
outside this repository adds games through the ``arena.games`` entry-point
group, e.g. in its ``pyproject.toml``::

    [project.entry-points."arena.games"]
    sealed_bid = "my_games.sealed_bid:SealedBidGame"

Every registered game, built in or by entry point, runs in the conformance suite.
"""

from __future__ import annotations

import importlib
from typing import Any

GAMES: dict[str, str] = {
    "spy": "arena.games.spy:SpyGame",
    "lsp": "arena.games.lsp:LspGame",
    "household": "arena.games.household:HouseholdGame",
    "skill_sp": "arena.games.skill_sp:SkillSpGame",
    "openspiel": "arena.games.openspiel:OpenSpielGame",
    "textarena": "arena.games.textarena:TextArenaGame",
}


class UnknownName(ValueError):
    """A name that is neither registered nor an importable ``module:attribute``."""


def load_entry_point(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise UnknownName(f"cannot import module {module_name!r} ({e.msg})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UnknownName(f"module {module_name!r} has no attribute {attr!r}") from None


def registered_games() -> dict[str, str]:
    """Built-in games plus those installed packages declare under the ``arena.games`` entry points."""
    from importlib.metadata import entry_points

    found = {ep.name: ep.value for ep in entry_points(group="arena.games")}
    return {**found, **GAMES}  # a built-in name cannot be shadowed


def resolve(table: dict[str, str], kind: str, name: str) -> Any:
    """Look ``name`` up in ``table`` or import it as ``module:attribute``."""
    if name in table:
        return load_entry_point(table[name])
    if ":" in name:
        return load_entry_point(name)
    known = ", ".join(sorted(table))
    raise UnknownName(f"unknown {kind} {name!r}; known: {known} (or give 'module:Class')")


def game_class(name: str) -> Any:
    from arena.core.game import LLMGame

    cls = resolve(registered_games() if name not in GAMES else GAMES, "game", name)
    if not (isinstance(cls, type) and issubclass(cls, LLMGame)):
        raise UnknownName(f"game {name!r} resolves to {cls!r}, which is not an LLMGame subclass")
    return cls
