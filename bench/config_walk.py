"""How far the config travels from the builder: stops, files and climbs (issue #52).

A static walk over ``arena/``, by the source alone (nothing is imported or run). It starts at the
builder (a function given as ``module:function``) with its config parameter tainted, and follows the
config and every value derived from it:

* inside a function, a name is tainted when it is a tainted parameter, or is assigned (or looped
  over) from an expression that reads a tainted name (``spec = cfg.policies[name]``); ``self.x =
  <tainted>`` taints ``self.x`` in every method of that class;
* a call passes the taint when one of its arguments reads a tainted name; the callee is resolved
  among arena's own functions, classes (their ``__init__``) and methods (``self.m``, or
  ``Class.m`` / ``obj.m`` where a tainted object is an instance of a known class), by the names the
  calling module imports or defines; calls into other libraries are not followed;
* each call followed is a **stop** (a function entered again is a stop again, its body walked once);
  the walk goes on inside the loop (``arena.loop``): a call that hands the config's values to another
  layer (a policy backend, the learner, the runner, the core) is a stop whose body is not walked, the
  end of that branch of the trip; raising an error (``arena.core.errors``) is no stop;
* a stop's **floor** is its module's height in arena's import graph (a module that imports no other
  arena module is floor 0; otherwise one above the highest it imports); a **climb** is a stop on a
  higher floor than the stop before it in the walk's order: the reader goes back up.

    python bench/config_walk.py arena.loop.build:build_trainer
    python bench/config_walk.py --at REV arena.loop.assemble:build_trainer_parts   # a past revision

Prints ``stops files climbs`` and, with ``--trace``, every stop in order.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module" or "module.attr"
    defs: dict[str, ast.AST] = field(default_factory=dict)  # top-level functions and classes


def load_modules(src: Path) -> dict[str, Module]:
    out = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mod = Module(name, path, tree)
        for node in _imports(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    mod.imports[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    mod.imports[(a.asname or a.name).split(".")[0]] = a.name.split(".")[0] if not a.asname else a.name
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                mod.defs[node.name] = node
        out[name] = mod
    return out


def _imports(tree: ast.AST) -> list[ast.AST]:
    """Every import statement, at module level or in a function, but not in ``if TYPE_CHECKING:`` blocks
    (annotations only: no module is loaded, as ../shared/tools/cycles.py counts them)."""
    out: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(child)
            visit(child)

    visit(tree)
    return out


def floors(mods: dict[str, Module]) -> dict[str, int]:
    deps = {}
    for name, mod in mods.items():
        targets = set()
        for full in mod.imports.values():
            while full and full not in mods:
                full = full.rpartition(".")[0]
            if full and full != name and full.startswith("arena"):
                targets.add(full)
        deps[name] = targets
    memo: dict[str, int] = {}

    def height(m: str, seen: frozenset[str] = frozenset()) -> int:
        if m in memo:
            return memo[m]
        if m in seen:  # an import cycle: count the loop once
            return 0
        h = 0 if not deps[m] else 1 + max(height(d, seen | {m}) for d in deps[m])
        memo[m] = h
        return h

    return {m: height(m) for m in mods}


def reads(node: ast.AST, tainted: set[str]) -> bool:
    """Whether an expression reads a tainted name (``cfg``, ``self.cfg``, ``spec``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and f"{sub.value.id}.{sub.attr}" in tainted:
            return True
    return False


def target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return [f"{target.value.id}.{target.attr}"]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in target_names(t)]
    return []


class Walker:
    def __init__(self, mods: dict[str, Module], inside: str = "arena.loop"):
        self.mods, self.inside = mods, inside
        self.floor = floors(mods)
        self.stops: list[tuple[str, str]] = []  # (module, qualified function)
        self.walked: set[tuple[str, str, tuple[str, ...]]] = set()
        self.class_taint: dict[tuple[str, str], set[str]] = {}  # (module, class) -> tainted self attributes

    def resolve(self, mod: Module, func: ast.AST, cls: str | None, types: dict[str, str]) -> tuple[Module, ast.AST, str | None] | None:
        """The arena definition a call's ``func`` names: (its module, its def, its class) or None."""
        if isinstance(func, ast.Name):
            return self.lookup(mod, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if owner == "self" and cls is not None:
                return self.method(mod, cls, func.attr)
            if owner in types:  # an object of a known arena class
                found = self.lookup(mod, types[owner])
                if found is not None and isinstance(found[1], ast.ClassDef):
                    return self.method(found[0], found[1].name, func.attr)
            found = self.lookup(mod, owner)  # Class.method, or module.function
            if found is not None and isinstance(found[1], ast.ClassDef):
                return self.method(found[0], found[1].name, func.attr)
            target = mod.imports.get(owner)
            if target in self.mods:
                return self.lookup(self.mods[target], func.attr)
        return None

    def lookup(self, mod: Module, name: str, depth: int = 0) -> tuple[Module, ast.AST, str | None] | None:
        if name in mod.defs:
            node = mod.defs[name]
            if isinstance(node, ast.ClassDef):
                init = self.method(mod, node.name, "__init__")
                return init if init is not None else None
            return mod, node, None
        full = mod.imports.get(name)
        if full and depth < 8:
            module, _, attr = full.rpartition(".")
            if module in self.mods:
                target = self.mods[module]
                if attr in target.defs and isinstance(target.defs[attr], ast.ClassDef):
                    return target, target.defs[attr], None
                return self.lookup(target, attr, depth + 1)
        return None

    def method(self, mod: Module, cls: str, name: str) -> tuple[Module, ast.AST, str | None] | None:
        node = mod.defs.get(cls)
        if not isinstance(node, ast.ClassDef):
            return None
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return mod, item, cls
        for base in node.bases:  # inherited
            if isinstance(base, ast.Name):
                found = self.lookup(mod, base.id)
                if found is not None and isinstance(found[1], ast.ClassDef):
                    return self.method(found[0], found[1].name, name)
                if found is not None and found[2] is not None:
                    return self.method(found[0], found[2], name)
        return None

    def enter(self, mod: Module, fn: ast.AST, cls: str | None, tainted_params: set[str]) -> None:
        if mod.name == "arena.core.errors":
            return
        if isinstance(fn, ast.ClassDef) or (self.stops and not mod.name.startswith(self.inside)):  # a class whose __init__ was not found: a dataclass, nothing to walk
            self.stops.append((mod.name, fn.name if isinstance(fn, ast.ClassDef) else (f"{cls}.{fn.name}" if cls else fn.name)))  # type: ignore[attr-defined]
            return
        qual = f"{cls}.{fn.name}" if cls else fn.name
        self.stops.append((mod.name, qual))
        key = (mod.name, qual, tuple(sorted(tainted_params)))
        if key in self.walked or len(self.stops) > 5000:
            return
        self.walked.add(key)
        tainted = set(tainted_params)
        if cls is not None:
            tainted |= self.class_taint.get((mod.name, cls), set())
        types: dict[str, str] = {}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name):
                for t in stmt.targets:
                    for n in target_names(t):
                        types[n] = stmt.value.func.id
        for _ in range(3):  # taint flows forward through assignments (a few passes reach a fixed point)
            for stmt in ast.walk(fn):
                value, targets = None, []
                if isinstance(stmt, ast.Assign):
                    value, targets = stmt.value, stmt.targets
                elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
                    value, targets = stmt.value, [stmt.target]
                elif isinstance(stmt, (ast.For, ast.comprehension)):
                    value, targets = stmt.iter, [stmt.target]
                elif isinstance(stmt, ast.NamedExpr):
                    value, targets = stmt.value, [stmt.target]
                if value is not None and reads(value, tainted):
                    for t in targets:
                        for n in target_names(t):
                            tainted.add(n)
                            if n.startswith("self.") and cls is not None:
                                self.class_taint.setdefault((mod.name, cls), set()).add(n)
        calls = sorted((c for c in ast.walk(fn) if isinstance(c, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
        for call in calls:  # in reading order
            passed = [(i, a) for i, a in enumerate(call.args) if reads(a, tainted)]
            passed_kw = [k for k in call.keywords if k.value is not None and reads(k.value, tainted)]
            via_self = (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                        and call.func.value.id == "self" and cls is not None and self.class_taint.get((mod.name, cls)))
            if not passed and not passed_kw and not via_self:
                continue
            found = self.resolve(mod, call.func, cls, types)
            if found is None:
                continue
            tmod, tfn, tcls = found
            params: set[str] = set()
            if isinstance(tfn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in tfn.args.posonlyargs + tfn.args.args]
                if names and names[0] in ("self", "cls"):
                    names = names[1:]
                params = {names[i] for i, _ in passed if i < len(names)}
                params |= {k.arg for k in passed_kw if k.arg}
            self.enter(tmod, tfn, tcls, params)


def walk(src: Path, start: str) -> Walker:
    mods = load_modules(src)
    module, _, func = start.partition(":")
    if module not in mods or func not in mods[module].defs:
        raise SystemExit(f"config_walk: {start}: no such function in {src}")
    fn = mods[module].defs[func]
    first = [a.arg for a in fn.args.args][0]  # type: ignore[attr-defined]
    w = Walker(mods)
    w.enter(mods[module], fn, None, {first})
    return w


def summary(w: Walker) -> tuple[int, int, int]:
    stops = w.stops[1:]  # the builder itself is where the walk starts, not a stop
    files = {m for m, _ in stops}
    climbs = sum(w.floor[b[0]] > w.floor[a[0]] for a, b in zip(w.stops, w.stops[1:]))
    return len(stops), len(files), climbs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("start", help="the builder, module:function (e.g. arena.loop.build:build_trainer)")
    p.add_argument("--at", help="a git revision to measure instead of the working tree")
    p.add_argument("--trace", action="store_true", help="print every stop")
    args = p.parse_args(argv)
    if args.at:
        tmp = Path(tempfile.mkdtemp(prefix="config_walk-"))
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.at, "arena"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        src = tmp / "arena"
    else:
        src = ROOT / "arena"
    w = walk(src, args.start)
    if args.trace:
        for m, f in w.stops:
            print(f"{w.floor[m]:2d}  {m}:{f}")
    stops, files, climbs = summary(w)
    print(f"stops {stops}  files {files}  climbs {climbs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
