"""``python -m arena.config show CONFIG``: the resolved config, and where each value came from.

    python -m arena.config show games/openspiel/kuhn.grpo.yaml
    python -m arena.config show games/openspiel/kuhn.grpo.yaml --set learner.lr=1e-5
    python -m arena.config show kuhn.yaml --json        # the resolved config alone, as config.json has it

Each line is ``key: value  # origin``: the file that set the value (a config, or one it ``extends``), the
``--set`` that did, the game's ``training_defaults``, or ``default`` (the config model's own). The merge
order is arena/loop/compose.py's. A config that does not validate is one line and exit 2, as everywhere.

``arena.config`` was an alias of :mod:`arena.loop.config` before it was this command; its names still
import from here for a release, with a DeprecationWarning (CHANGELOG.md).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from arena.cli import run_cli
from arena.core.errors import OneLineParser


def build_parser() -> Any:
    p = OneLineParser(prog="python -m arena.config", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the resolved config with the origin of each value")
    show.add_argument("config", help="YAML config (e.g. games/openspiel/kuhn.yaml) or a registered game name")
    show.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a key")
    show.add_argument("--json", action="store_true", help="print the resolved config alone, as JSON")
    return p


def show(config: str, overrides: list[str], as_json: bool = False) -> str:
    """The text ``show`` prints (module docstring)."""
    from arena.loop.compose import Layer, leaves, provenance
    from arena.loop.config import config_layers, load_config, resolved_config

    cfg = load_config(config, overrides)
    resolved = resolved_config(cfg)
    if as_json:
        return json.dumps(resolved, indent=2)
    layers, _ = config_layers(config)
    defaults = getattr(cfg.game.cls, "training_defaults", {}) or {}
    below = [Layer(f"{cfg.game.cls.__name__}.training_defaults", {k: v for k, v in defaults.items()})]
    sets = [Layer(f"--set {item}", _dotted(item)) for item in overrides]
    origin = provenance(below + layers + sets, resolved)
    width = max(len(k) for k, _ in leaves(resolved))
    return "\n".join(f"{key:<{width}}  {json.dumps(value)}  # {origin[key]}" for key, value in leaves(resolved))


def _dotted(item: str) -> dict[str, Any]:
    """``a.b=v`` as ``{"a": {"b": v}}`` (the value's type does not matter to where it came from)."""
    key, _, _ = item.partition("=")
    out: dict[str, Any] = {}
    node = out
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = True
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(show(args.config, args.overrides, args.json))
    return 0


def __getattr__(name: str) -> Any:
    """The names of :mod:`arena.loop.config`, which ``arena.config`` aliased before (for a release)."""
    import arena.loop.config as moved

    if hasattr(moved, name):
        warnings.warn(f"'arena.config.{name}' moved to 'arena.loop.config.{name}'; import it from there (the old "
                      "path goes in arena 0.3; see CHANGELOG.md)", DeprecationWarning, stacklevel=2)
        return getattr(moved, name)
    raise AttributeError(f"module 'arena.config' has no attribute {name!r}")


if __name__ == "__main__":
    run_cli(main)
