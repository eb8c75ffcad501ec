"""Config files that compose: ``extends:``, the merge order, where each value came from, and a YAML reader
with bounds.

**extends.** A config may start from another: ``extends: kuhn.yaml`` (a path relative to the file, or a
shipped config as ``games/openspiel/kuhn.yaml``), or a list of them, merged in order. Chosen over named
variants (PettingZoo's presets) and Hydra's defaults lists because a variant is then a file like any other
config, one a user copies, runs and diffs as it stands, and one key says where it came from; prime-rl and
verl merge layered files the same way.

**The merge order**, lowest first: the pydantic defaults; the game's ``training_defaults``; each file
``extends`` names (itself merged the same way, so a chain of files works); the file itself; then each
``--set`` in order. pydantic validates the merged result, once. Mappings merge key by key; any other value
(a number, a string, a list) replaces the one below. A mapping that names what it is (``name:`` an
estimator or objective, ``source:`` a warm start, ``rule:`` a schedule, ``kind:`` a policy) and names
another thing than the one below replaces it whole: a ``grpo`` estimator does not keep a ``rae``
estimator's options. ``key: null`` sets null (e.g. ``train.warm_start: null`` turns a base's warm start off). A file's ``replace:``
lists sections (dotted keys) it gives whole: what the files below had there goes, so a variant with other
policies or seats (``replace: [policies, seats]``) does not keep the base's.

**Where each value came from**: :func:`layers` keeps every layer apart, so ``python -m arena.config show
CONFIG`` prints the resolved config with the file or flag of each value (:func:`provenance`).

**Bounds** (issue #54): a config is a regular file of at most :data:`MAX_BYTES`; YAML nesting at most
:data:`MAX_DEPTH` deep; an integer of at most :data:`MAX_DIGITS` digits; aliases and merge keys expanding to
at most :data:`MAX_NODES` nodes (a "billion laughs" file is refused, not expanded); ``extends`` at most
:data:`MAX_EXTENDS` files deep, without cycles. Each breach is one :class:`~arena.core.errors.ConfigError`
line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from arena.core.errors import ConfigError

MAX_BYTES = 1 << 20  # 1 MiB: the largest shipped config is 4 KiB
MAX_DEPTH = 64
MAX_DIGITS = 100
MAX_NODES = 100_000  # nodes of the YAML after expanding aliases and merge keys
MAX_EXTENDS = 16
#: Keys that say what a mapping is: another value below means another thing, replaced whole.
KINDS = ("name", "source", "rule", "kind")


@dataclass(frozen=True)
class Layer:
    """One layer of a config: its values and where they came from (a file, ``--set``, the game's defaults)."""

    origin: str
    values: dict[str, Any]
    replace: tuple[str, ...] = ()  # dotted sections this layer gives whole: what the layers below had there goes


# ------------------------------------------------------------------ bounded YAML
class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a depth bound while it composes (its composer recurses once a level)."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"line {mark.line + 1}: nested more than {MAX_DEPTH} levels deep; a config is a few "
                                  "levels of sections")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_yaml_int(self, node: Any) -> int:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_DIGITS:
            raise ConfigError(f"line {node.start_mark.line + 1}: an integer of {digits} digits; at most {MAX_DIGITS}")
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def expanded_size(root: yaml.Node) -> int:
    """Nodes of ``root`` with every alias and merge key expanded, counted without expanding (shared nodes are
    counted once per use, memoised by identity); stops counting past :data:`MAX_NODES`."""
    memo: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) in memo:
            return memo[id(node)]
        memo[id(node)] = 1  # a cycle (a recursive alias) counts once
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(v) for v in node.value)
        else:
            total = 1
        memo[id(node)] = min(total, MAX_NODES + 1)
        return memo[id(node)]

    return size(root)


def parse_yaml(text: str) -> Any:
    """``text`` as YAML within the bounds (module docstring); ``ConfigError`` (one line, without the file's
    name: the caller adds it) or ``yaml.YAMLError`` (the caller words it)."""
    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if expanded_size(root) > MAX_NODES:
            raise ConfigError(f"its aliases and merge keys expand to more than {MAX_NODES} nodes; a config that "
                              "large is refused (write the values out)")
        return loader.construct_document(root)
    except RecursionError:
        raise ConfigError(f"nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()


def read_text(path: Path, shown: str) -> str:
    """A config file's text: a regular file (no FIFO, no device) of at most :data:`MAX_BYTES`, UTF-8."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: no such config file") from None
    except OSError as e:
        raise ConfigError(f"{shown}: cannot read the config file ({e.strerror or e})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{shown}: is a directory, not a config file")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{shown}: not a regular file (a FIFO, a device or a socket); a config is a YAML file")
    if info.st_size > MAX_BYTES:
        raise ConfigError(f"{shown}: {info.st_size} bytes; a config is at most {MAX_BYTES} bytes")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{shown}: cannot read the config file ({e.strerror or e})") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{shown}: more than {MAX_BYTES} bytes; a config is at most {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{shown}: not UTF-8 text (byte {e.start}); a config is a YAML file") from None


def load_yaml(path: Path, shown: str) -> Any:
    """One file's YAML, within the bounds, with every mistake one line naming the file."""
    text = read_text(path, shown)
    try:
        raw = parse_yaml(text)
    except ConfigError as e:
        raise ConfigError(f"{shown}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line, even for a NUL byte
        raise ConfigError(f"{shown}:{where} not valid YAML ({problem})") from None
    twice = duplicate_key(text)
    if twice is not None:
        line, where, key = twice
        raise ConfigError(f"{shown}: line {line}: {where + ': ' if where else ''}{key!r} is given twice; YAML would "
                          "keep the last silently (for seats: a seat given two policies); give each key once")
    return raw if raw is not None else {}


# ------------------------------------------------------------------ names and repeated keys
def default_config_path(name: str) -> Path | None:
    """A registered game's own YAML (``<its package>/<name>.yaml``) when ``name`` is a game, not a file.

    ``spy`` and ``games/spy.yaml`` (when no such file exists) both name ``arena/games/spy/spy.yaml``;
    ``games/<path>`` names ``<path>`` inside the installed :mod:`arena.games` (the built-in configs'
    documented paths, e.g. ``games/openspiel/kuhn.yaml``), from a checkout and from an installed wheel.
    """
    given = Path(name)
    if given.exists():
        return None
    if not given.is_absolute() and len(given.parts) > 2 and given.parts[0] == "games":
        import importlib.util

        spec = importlib.util.find_spec("arena.games")  # the installed configs' folder, without importing the games
        folder = next(iter(spec.submodule_search_locations or [])) if spec is not None else None
        if folder is None:
            return None
        shipped = Path(folder).joinpath(*given.parts[1:])
        return shipped if shipped.is_file() else None
    if given.suffix in (".yaml", ".yml") and given.parent.name == "games":
        name = given.stem  # games/<name>.yaml: the game's own YAML
    elif "/" in name or name.endswith((".yaml", ".yml")):
        return None
    import inspect

    from arena.core.registry import UnknownName, game_class

    try:
        cls = game_class(name)
    except UnknownName:
        return None
    candidate = Path(inspect.getfile(cls)).parent / f"{name}.yaml"
    return candidate if candidate.is_file() else None


def duplicate_key(text: str) -> tuple[int, str, str] | None:
    """The first key given twice in one mapping of a YAML text: (its second line, the dotted path of the
    mapping, the key); None when every key is unique (PyYAML itself keeps the last one silently). Each node
    is read once: an alias is not walked again (a "billion laughs" costs its size, not its expansion)."""
    seen_nodes: set[int] = set()

    def walk(node: yaml.Node, where: str) -> tuple[int, str, str] | None:
        if id(node) in seen_nodes:
            return None
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if isinstance(key, yaml.ScalarNode) and name in seen:
                    return key.start_mark.line + 1, where, name
                seen.add(name)
                found = walk(value, f"{where}.{name}" if where else name)
                if found:
                    return found
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                found = walk(item, f"{where}.{i}")
                if found:
                    return found
        return None

    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
    except (yaml.YAMLError, ConfigError, RecursionError):
        return None  # the parse has already said what is wrong
    finally:
        loader.dispose()
    return walk(root, "") if root is not None else None



# ------------------------------------------------------------------ extends and the merge
def merge(base: Any, top: Any) -> Any:
    """``top`` over ``base`` (module docstring: mappings key by key, a mapping of another kind whole)."""
    if not isinstance(base, dict) or not isinstance(top, dict):
        return top
    if any(k in base and k in top and base[k] != top[k] for k in KINDS if isinstance(top.get(k), str)):
        return top
    return {k: merge(base.get(k), top[k]) if k in base else top[k] for k in top} | {
        k: v for k, v in base.items() if k not in top}


def file_layers(path: Path, shown: str, seen: tuple[Path, ...] = ()) -> list[Layer]:
    """The layers of a config file: those of each file it ``extends``, in order, then its own values."""
    real = path.resolve()
    if real in seen:
        chain = " -> ".join(p.name for p in (*seen, real))
        raise ConfigError(f"{shown}: extends: a cycle ({chain})")
    if len(seen) >= MAX_EXTENDS:
        raise ConfigError(f"{shown}: extends: more than {MAX_EXTENDS} files deep")
    raw = load_yaml(path, shown)
    if not isinstance(raw, dict):
        raise ConfigError(f"{shown}: expected a mapping of sections, got {type(raw).__name__}")
    raw = dict(raw)
    bases = raw.pop("extends", None)
    replace = raw.pop("replace", None) or []
    if isinstance(replace, str):
        replace = [replace]
    if not isinstance(replace, list) or not all(isinstance(k, str) and k.strip() for k in replace):
        raise ConfigError(f"{shown}: replace: {replace!r} must list sections (dotted keys) this file gives whole")
    if replace and bases is None:
        raise ConfigError(f"{shown}: replace: {', '.join(replace)} replaces what a base file gives, but this file "
                          "extends none; remove replace or add extends")
    own = Layer(shown, raw, tuple(replace))
    if bases is None:
        return [own]
    names = [bases] if isinstance(bases, str) else bases
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError(f"{shown}: extends: {bases!r} must name a config file, or a list of them")
    out: list[Layer] = []
    for name in names:
        local = path.parent / name
        base = local if local.exists() else (default_config_path(name) or local)
        base_shown = name if base is not local else os.path.relpath(local)
        if not base.exists():
            raise ConfigError(f"{shown}: extends: no such config file {name!r} (relative to {path.parent}, or a "
                              "shipped games/<game>/<file>.yaml)")
        out += file_layers(base, base_shown, (*seen, real))
    return out + [own]


def merged(layers: list[Layer]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        for dotted in layer.replace:  # the section as this file gives it, nothing of the files below
            drop(out, dotted.split("."))
        out = merge(out, layer.values)
    return out


def drop(node: dict[str, Any], keys: list[str]) -> None:
    """Remove ``node[k0][k1]...[kn]`` where it exists."""
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            return
        node = child
    node.pop(keys[-1], None)


# ------------------------------------------------------------------ where each value came from
def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf; a list or an empty mapping is one leaf."""
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, node


def provenance(layers: list[Layer], resolved: dict[str, Any]) -> dict[str, str]:
    """Dotted key of every leaf of the resolved config -> the layer that set it (the last that has it), else
    ``default`` (the config model's own)."""
    origin: dict[str, str] = {}
    for layer in layers:
        for dotted in layer.replace:
            for k in [k for k in origin if k == dotted or k.startswith(dotted + ".")]:
                del origin[k]
        for key, _ in leaves(layer.values):
            for k in list(origin):  # a mapping replaced whole takes its keys' origins with it
                if k.startswith(key + "."):
                    origin[k] = layer.origin
            origin[key] = layer.origin
    out = {}
    for key, _ in leaves(resolved):
        found = next((origin[p] for p in _prefixes(key) if p in origin), "default")
        out[key] = found
    return out


def _prefixes(key: str) -> list[str]:
    """``a.b.c``, ``a.b``, ``a``: the key itself first, then the sections holding it."""
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
