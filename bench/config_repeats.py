"""How much the shipped configs repeat themselves (issue #52).

Each shipped config (``arena/games/**/*.yaml``) is read as written, not resolved: its ``extends:``
is one setting, what it inherits is none. A **setting** is a leaf of its YAML (a scalar, or a list
as a whole) under its dotted key. A setting **repeats a sibling** when another config in the same
folder writes the same key with the same value; a scalar setting **restates the default** when it
equals what the config would be without it (the resolved config of a copy with that one key
removed, through ``arena.loop.config``: the game's training defaults and the pydantic defaults).

    python bench/config_repeats.py            # the totals
    python bench/config_repeats.py --files    # per file
    python bench/config_repeats.py --at REV   # the configs of a past revision (repeats only)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value of every leaf (a list is one leaf)."""
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out |= leaves(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return {prefix: json.dumps(node, sort_keys=True, default=str)}


def shipped(texts: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {name: leaves(yaml.safe_load(text) or {}) for name, text in texts.items()}


def repeats(configs: dict[str, dict[str, Any]]) -> tuple[int, int, dict[str, tuple[int, int]]]:
    by_folder: dict[str, list[str]] = defaultdict(list)
    for name in configs:
        by_folder[str(Path(name).parent)].append(name)
    total = repeated = 0
    per: dict[str, tuple[int, int]] = {}
    for name, settings in configs.items():
        siblings = [configs[o] for o in by_folder[str(Path(name).parent)] if o != name]
        r = sum(any(s.get(k) == v for s in siblings) for k, v in settings.items())
        per[name] = (r, len(settings))
        total += len(settings)
        repeated += r
    return repeated, total, per


def restated(path: Path) -> tuple[int, int]:
    """(scalar settings equal to the default they override, scalar settings) of one config file."""
    import arena.loop.checks as checks
    from arena.core.errors import ConfigError
    from arena.loop.config import load_config, resolved_config

    # A model named by a run's checkpoint (kuhn.ed.fine.yaml: stage 1's) exists only after that run; the count
    # is about the settings, so the model check is off (as in tests/arena/test_config_snapshots.py).
    checks.check_model_name = lambda *a, **k: None
    raw = yaml.safe_load(path.read_text()) or {}
    base = leaves(resolved_config(load_config(path)))
    same = scalars = 0
    for key, value in leaves(raw).items():
        if key == "extends" or value.startswith("[") or key.startswith("game.name"):
            continue
        scalars += 1
        parts = key.split(".")
        trimmed = json.loads(json.dumps(raw))
        node = trimmed
        for p in parts[:-1]:
            node = node[p]
        node.pop(parts[-1])
        tmp = path.with_name(f".restated-{path.name}")
        tmp.write_text(yaml.safe_dump(trimmed))
        try:
            without = leaves(resolved_config(load_config(tmp)))
        except ConfigError:  # the key is needed (a required field): not a default
            continue
        finally:
            tmp.unlink()
        same += without.get(key) == base.get(key)
    return same, scalars


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--at", help="a git revision (repeats only)")
    p.add_argument("--files", action="store_true")
    p.add_argument("--defaults", action="store_true", help="also count restated defaults (loads each config)")
    args = p.parse_args(argv)
    if args.at:
        names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", args.at, "arena/games"],
                               capture_output=True, text=True, check=True).stdout.split()
        texts = {n: subprocess.run(["git", "-C", str(ROOT), "show", f"{args.at}:{n}"], capture_output=True, text=True,
                                   check=True).stdout for n in names if n.endswith(".yaml")}
    else:
        texts = {str(f.relative_to(ROOT)): f.read_text() for f in sorted((ROOT / "arena/games").rglob("*.yaml"))}
    repeated, total, per = repeats(shipped(texts))
    if args.files:
        for name, (r, n) in sorted(per.items()):
            print(f"{r:4d} / {n:4d}  {100 * r / max(n, 1):5.1f}%  {name}")
    print(f"configs {len(texts)}  settings {total}  repeating a sibling {repeated} ({100 * repeated / max(total, 1):.1f}%)")
    if args.defaults and not args.at:
        same = scalars = 0
        for name in texts:
            a, b = restated(ROOT / name)
            same, scalars = same + a, scalars + b
        print(f"scalar settings {scalars}  restating the default {same} ({100 * same / max(scalars, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
