"""Old import paths, kept working for one release (0.2) with a DeprecationWarning each.

Published docs used ``arena.game``, ``arena.messages``, ``arena.rules``, ``arena.types`` (now under
:mod:`arena.core`) and the top-level packages ``games``, ``policies`` and ``learners`` (now
:mod:`arena.games`, :mod:`arena.policies`, :mod:`arena.learners`; the wheel installs ``arena``
alone). CHANGELOG.md lists every move.

How: a finder on ``sys.meta_path`` answers an old top-level name (``games``) only when no other
installed module has that name, so another package called ``games`` or ``policies`` always wins over
the shim; it answers a submodule of an old name (``games.spy``) only when the parent is the alias.
The old name becomes an alias of the new module (the same object, so registries, ``isinstance``
checks and pickles agree). It is installed by ``import arena`` and, in an installed wheel, at
interpreter start by ``arena_compat.pth`` (a one-line import of this module), so that a script
whose first line is ``from games.spy import SpyGame`` still runs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

# old dotted prefix -> new dotted prefix; the longest match wins.
MOVED: dict[str, str] = {
    **{f"arena.{m}": f"arena.core.{m}" for m in (
        "distributed", "game", "game_types", "messages", "models", "registry", "rules", "transcript", "types")},
    **{f"arena.{m}": f"arena.loop.{m}" for m in ("build", "checkpoint", "trainer")},  # arena.config: a CLI now
    # the training features, now components of the loop (issue #52)
    **{f"{prefix}.{m}": f"arena.loop.components.{m}" for prefix in ("arena", "arena.loop") for m in (
        "canary", "descent", "evals", "league", "loggers", "respond", "rollouts", "stop", "warm_start")},
    **{f"arena.{m}": f"arena.rank.{m}" for m in ("compare", "pairwise")},
    **{f"arena.{m}": f"arena.stats.{m}" for m in ("ratings", "seating")},
    "games": "arena.games",
    "policies": "arena.policies",
    "learners": "arena.learners",
}
REMOVED_IN = "0.3"
_PREFIXES = sorted(MOVED, key=len, reverse=True)


def new_name(old: str) -> str | None:
    """The module that replaced ``old``, or None when ``old`` is not a moved path."""
    for prefix in _PREFIXES:
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix):]
    return None


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points at the importing line: the first frame outside this module and
    the import machinery (``warnings.warn`` already skips importlib's frames when it counts)."""
    frame, level = sys._getframe(2), 2  # the frame above create_module
    while frame is not None and (frame.f_code.co_filename == __file__ or "importlib" in frame.f_code.co_filename):
        if frame.f_code.co_filename == __file__:
            level += 1
        frame = frame.f_back
    return level


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"'{self.old}' moved to '{self.new}'; import '{self.new}' instead "
                      f"(the old path goes in arena {REMOVED_IN}; see CHANGELOG.md)",
                      DeprecationWarning, stacklevel=_caller_stacklevel())
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The new module is already executed; the old name is only an alias of it."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        head, _, _ = fullname.rpartition(".")
        if not head:
            other = importlib.machinery.PathFinder.find_spec(fullname)
            if other is not None and other.origin is not None:
                return None  # another installed module or regular package has this name: it wins
        moved_head = new_name(head) if head else None
        if moved_head is not None and sys.modules.get(head) is not sys.modules.get(moved_head):
            return None  # a submodule of someone else's package of that name
        real = importlib.util.find_spec(new)
        if real is None:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new),
                                              is_package=real.submodule_search_locations is not None)
        if real.submodule_search_locations is not None:
            spec.submodule_search_locations = list(real.submodule_search_locations)
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once (idempotent): first, so that ``games.spy`` is the
    alias of ``arena.games.spy`` rather than a second copy found through the alias's ``__path__``."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


install()
