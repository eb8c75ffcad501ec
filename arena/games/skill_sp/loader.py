"""Skill packages: parse a ``SKILL.md`` + ``validators.py`` pair and check its structure.

A package lives in ``skills/<name>/``. ``SKILL.md`` is YAML front matter between
``---`` lines, then a Markdown body with three ``##`` sections::

    ---
    name: unit_conversion            # lowercase slug, equal to the folder name
    description: one line, what tasks this skill makes
    kind: tool_use                   # or logic
    tools: [convert_units]           # tool_use only: names from tools.TOOLS
    routing: {domain: measurement, tags: [units], difficulty: easy}
    ---
    ## Rules            procedural rules for writing a task
    ## Generation hints how to vary tasks
    ## Examples         "### ..." subsections, each "Task: <prompt>" then a ```json contract block

``validators.py`` is standard-library Python (plus ``import tools`` for tool-use
skills) defining ``validate(contract) -> list[str]`` (problems; empty means
accepted) and ``check(contract, response) -> bool`` (the exact checker of a
solver's response). It runs only in the sandbox; here it is only parsed.

The same parser reads model-written packages (induction): any text gives a
:class:`SkillPackage` or an :class:`~arena.core.game_types.Invalid` with the reason,
never an exception. Structural validity is necessary, not sufficient: the
library also runs each example contract through the package's own validators in
the sandbox (:func:`examples_jobs`) before a package enters it.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arena.core.game_types import Invalid
from arena.games.skill_sp import tools
from arena.games.skill_sp.sandbox import MAX_DEPTH, Job, json_depth

SKILLS_DIR = Path(__file__).with_name("skills")
TOOLS_SOURCE = Path(tools.__file__).read_text()
SECTIONS = ("Rules", "Generation hints", "Examples")
# Modules a validator may import: pure computation only (no os, io, socket, subprocess, ...).
ALLOWED_IMPORTS = frozenset(
    {"tools", "itertools", "math", "json", "re", "datetime", "collections", "functools", "statistics", "fractions",
     "string", "operator", "typing", "dataclasses", "__future__"}
)  # fmt: skip
_SLUG = re.compile(r"[a-z][a-z0-9_]{2,39}")


class Routing(BaseModel):
    """What the controller routes on, besides the statistics."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    domain: str = Field(min_length=1, max_length=40, description="Broad area, e.g. math, text, logic.")
    tags: tuple[str, ...] = Field(default=(), max_length=12, description="Keywords for reports and novelty checks.")
    difficulty: Literal["easy", "medium", "hard"] = Field(default="medium", description="The author's estimate.")


class Example(BaseModel):
    """A few-shot example: a visible prompt and its hidden contract."""

    model_config = ConfigDict(frozen=True)
    prompt: str = Field(min_length=1)
    contract: dict[str, Any]


class SkillPackage(BaseModel):
    """One skill: routing metadata, procedural text, examples and validator source."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=f"^{_SLUG.pattern}$", description="Lowercase slug, the folder name.")
    description: str = Field(min_length=8, max_length=300)
    kind: Literal["tool_use", "logic"]
    tools: tuple[str, ...] = ()
    routing: Routing
    rules: str = Field(min_length=1)
    hints: str = Field(min_length=1)
    examples: tuple[Example, ...] = Field(min_length=1)
    validators: str = Field(min_length=1, description="Source of validators.py.")

    def sandbox_files(self) -> dict[str, str]:
        """What a sandbox run of this package's validators needs."""
        return {"validators.py": self.validators, "tools.py": TOOLS_SOURCE}

    def skill_md(self) -> str:
        """The package's SKILL.md text (parse_skill(skill_md(), validators) gives the package back)."""
        front = {"name": self.name, "description": self.description, "kind": self.kind}
        if self.tools:
            front["tools"] = list(self.tools)
        front["routing"] = {"domain": self.routing.domain, "tags": list(self.routing.tags),
                            "difficulty": self.routing.difficulty}  # fmt: skip
        examples = "\n\n".join(
            f"### Example {i + 1}\nTask: {ex.prompt}\n\n```json\n{json.dumps(ex.contract)}\n```"
            for i, ex in enumerate(self.examples)
        )
        body = f"## Rules\n{self.rules}\n\n## Generation hints\n{self.hints}\n\n## Examples\n{examples}\n"
        return f"---\n{yaml.safe_dump(front, sort_keys=False)}---\n{body}"


def _sections(body: str) -> dict[str, str]:
    parts = re.split(r"^## +(.+?)\s*$", body, flags=re.M)
    return {title.strip(): text.strip() for title, text in zip(parts[1::2], parts[2::2])}


def _examples(text: str) -> list[dict[str, Any]] | str:
    out = []
    for block in re.split(r"^### .*$", text, flags=re.M)[1:]:
        task = re.search(r"^Task:\s*(.+?)(?=^```|\Z)", block, flags=re.M | re.S)
        code = re.search(r"^```json\s*\n(.*?)^```", block, flags=re.M | re.S)
        if task is None or code is None:
            return "each example needs a 'Task:' line and a ```json contract block"
        if json_depth(code.group(1)) > MAX_DEPTH:  # json.loads would recurse past the stack
            return f"example contract is nested deeper than {MAX_DEPTH} levels"
        try:
            contract = json.loads(code.group(1))
        except (ValueError, RecursionError) as exc:
            return f"example contract is not JSON: {exc}"[:300]
        out.append({"prompt": task.group(1).strip(), "contract": contract})
    return out


# Names a validator may not use: dynamic imports and code, introspection, files, the interpreter.
FORBIDDEN_NAMES = frozenset(
    {"__import__", "importlib", "exec", "eval", "compile", "getattr", "setattr", "delattr", "globals", "locals",
     "vars", "dir", "open", "input", "breakpoint", "help", "memoryview", "__builtins__", "__loader__", "__spec__",
     "sys", "os", "builtins", "gc", "inspect", "ctypes", "object"}
)  # fmt: skip
# Attributes that lead from a value to frames, code, globals or other modules (besides every __dunder__,
# every _private name and MODULE_DOORS).
FORBIDDEN_ATTRIBUTES = frozenset(
    {"gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "f_globals", "f_locals", "f_builtins", "f_back",
     "f_code", "tb_frame", "tb_next", "co_code", "func_globals", "mro", "format_map", "sys", "os", "builtins",
     "modules", "importlib", "_os", "_sys", "subprocess", "posix", "loader", "spec",
     # attribute access by string and frame access, which the name checks above cannot see through
     "inspect", "attrgetter", "methodcaller", "getattr_static", "currentframe", "_getframe", "getframeinfo",
     "getouterframes", "getinnerframes", "f_trace", "gc", "ctypes",
     # string.Formatter().get_field("0.__class__...") reads attributes named in a string; typing evaluates
     # annotation strings (eval) in get_type_hints and ForwardRef
     "Formatter", "get_field", "get_type_hints", "ForwardRef", "walk_stack", "walk_tb", "extract_stack",
     # functools.update_wrapper / wraps copy attributes named in strings (assigned=, updated=) from one object
     "update_wrapper", "wraps"}
)  # fmt: skip
# Modules that lead to the interpreter (frames, code objects, eval), to files, descriptors or processes.
_DOOR_MODULES = frozenset(
    {"builtins", "os", "posix", "sys", "io", "_io", "codecs", "_codecs", "importlib", "inspect", "types", "marshal",
     "ctypes", "gc", "shutil", "tempfile", "pathlib", "socket", "select", "selectors", "subprocess", "threading",
     "_thread", "traceback", "linecache", "tokenize", "zipfile", "zipimport", "pkgutil", "runpy", "code", "codeop",
     "pdb", "bdb", "dis", "logging", "signal", "mmap", "resource", "faulthandler", "pickle", "_pickle", "copyreg",
     "weakref", "_weakref", "glob", "fcntl", "pty", "tty", "atexit", "sysconfig", "site", "_imp", "_frozen_importlib",
     "_frozen_importlib_external", "_posixsubprocess", "_signal", "_ctypes"}
)  # fmt: skip


def _module_doors() -> frozenset[str]:
    """Names under which an allowed module, or a module it holds (transitively, through no door), holds a door module.

    Attribute chains through module objects (``re.enum.bltns.eval``, ``json.codecs.open``,
    ``dataclasses.inspect``) end with such a name, whatever the modules on the way; it is
    computed from this interpreter's standard library, the one the sandbox runs."""
    import importlib
    import types

    frontier = [importlib.import_module(m) for m in sorted(ALLOWED_IMPORTS - {"tools"})] + [tools]
    seen: set[int] = set()
    doors: set[str] = set()
    while frontier:
        module = frontier.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        for name, value in list(vars(module).items()):
            if isinstance(value, types.ModuleType):
                if value.__name__.split(".")[0] in _DOOR_MODULES:
                    doors.add(name)  # past a door the chain is refused already: no need to look inside
                else:
                    frontier.append(value)
    return frozenset(doors)


MODULE_DOORS = _module_doors()


def validator_problems(source: str) -> list[str]:
    """Static checks of validators.py: it parses, imports only ALLOWED_IMPORTS, defines validate and check.

    On the AST, besides ``import`` statements (and no ``from m import *``, which would
    bring ``attrgetter`` or ``get_type_hints`` in under names no check sees): no name of :data:`FORBIDDEN_NAMES`
    (``__import__``, ``importlib``, ``exec``/``eval``/``compile``, ``getattr``
    and friends, ``globals``...), no ``__dunder__`` name other than ``__name__``, and
    no attribute, whether read with a dot or by a match-statement class pattern
    (``case tuple(__class__=t)``), that is a dunder, ``_private``, in
    :data:`FORBIDDEN_ATTRIBUTES` (``frame.f_globals``, ``string.Formatter``...) or in
    :data:`MODULE_DOORS` (``re.enum.bltns``, ``json.codecs``); no string naming a
    dunder (``"0.__class__"``); no string inside an annotation (``typing.get_type_hints``
    and ``functools.singledispatch`` evaluate it: ``def f(x: "eval")`` hands out ``eval``,
    which runs bytes or a code object no check reads); the source is UTF-8 (a ``coding``
    cookie for anything else would make the sandbox run other code than the one checked here).

    It is advisory: a first filter that refuses the usual routes to the interpreter,
    not a proof (Python offers more). What holds without it: the sandbox contains
    whatever the validators do, and the judge's verdict is never written by a process
    that imported them (judge.py), so a validator that takes over its interpreter
    controls only its own say, which it has anyway.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source.encode("utf-8")).readline)
        tree = ast.parse(source.encode("utf-8"))  # bytes: a coding cookie applies, as when the sandbox imports it
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # UnicodeError is a ValueError
        return [f"validators.py does not parse: {exc}"[:300]]
    if encoding not in ("utf-8", "utf-8-sig"):
        return [f"validators.py declares the encoding {encoding!r}: only UTF-8 is accepted"]
    problems = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0] if node.level == 0 else "." * node.level]
            problems += [f"validators.py imports {a.name!r} from {node.module!r}" for a in node.names
                         if a.name in FORBIDDEN_NAMES or _forbidden_attribute(a.name) or a.name == "*"]  # fmt: skip
        elif isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or _dunder(node.id)):
            problems.append(f"validators.py uses {node.id!r}")
        elif isinstance(node, ast.Attribute) and _forbidden_attribute(node.attr):
            problems.append(f"validators.py uses the attribute {node.attr!r}")
        elif isinstance(node, ast.MatchClass):
            problems += [f"validators.py reads the attribute {a!r} in a class pattern" for a in node.kwd_attrs
                         if _forbidden_attribute(a)]  # fmt: skip
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            problems += [f"validators.py names {m!r} in a string" for m in _DUNDER_IN_TEXT.findall(text)
                         if _dunder(m)]  # fmt: skip
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in FORBIDDEN_NAMES:
            problems.append(f"validators.py defines {node.name!r}")
        elif isinstance(node, ast.Global | ast.Nonlocal):
            problems += [f"validators.py uses {n!r}" for n in node.names if n in FORBIDDEN_NAMES or _dunder(n)]
        elif isinstance(node, ast.arg | ast.FunctionDef | ast.AsyncFunctionDef | ast.AnnAssign):
            problems += _text_in_annotation(node.returns if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                                            else node.annotation)  # fmt: skip
        problems += [f"validators.py imports {n!r}" for n in names if n not in ALLOWED_IMPORTS]
    problems = list(dict.fromkeys(problems))
    defined = {n.name: len(n.args.args) for n in tree.body if isinstance(n, ast.FunctionDef)}
    if defined.get("validate") != 1:
        problems.append("validators.py must define validate(contract)")
    if defined.get("check") != 2:
        problems.append("validators.py must define check(contract, response)")
    return problems


def _text_in_annotation(annotation: ast.expr | None) -> list[str]:
    """A string anywhere in an annotation is code: ``typing.get_type_hints`` (also behind
    ``functools.singledispatch``'s ``register``) evaluates it with ``eval``, and the checks above
    never see inside a string. ``from __future__ import annotations`` stays fine: its strings are
    the annotations' own source, checked as code here."""
    if annotation is None:
        return []
    return [f"validators.py has a string in an annotation ({n.value[:40]!r}): it would run as code"
            for n in ast.walk(annotation) if isinstance(n, ast.Constant) and isinstance(n.value, str | bytes)]  # fmt: skip


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and name not in ("__name__", "__future__", "__main__")


def _forbidden_attribute(name: str) -> bool:
    """A dunder, a _private name, or a name of FORBIDDEN_ATTRIBUTES or MODULE_DOORS."""
    return name.startswith("_") or name in FORBIDDEN_ATTRIBUTES or name in MODULE_DOORS


_DUNDER_IN_TEXT = re.compile(r"__\w+__")


def parse_skill(skill_md: str, validators: str, folder_name: str | None = None) -> SkillPackage | Invalid:
    """A package from its two files' text, or Invalid(reason); never raises."""
    if not isinstance(skill_md, str) or not isinstance(validators, str):
        return Invalid(reason="SKILL.md and validators.py must be text")
    try:
        return _parse_skill(skill_md, validators, folder_name)
    except RecursionError:  # YAML front matter or a value nested past the stack (pydantic, yaml's composer)
        return Invalid(reason="SKILL.md is nested too deeply")


def _parse_skill(skill_md: str, validators: str, folder_name: str | None) -> SkillPackage | Invalid:
    m = re.match(r"\A---[ \t]*\n(.*?)^---[ \t]*\n(.*)\Z", skill_md, flags=re.S | re.M)
    if m is None:
        return Invalid(reason="SKILL.md must start with front matter between '---' lines")
    try:
        front = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        return Invalid(reason=f"front matter is not YAML: {str(exc).splitlines()[0]}")
    if not isinstance(front, dict):
        return Invalid(reason="front matter must be a mapping")
    sections = _sections(m.group(2))
    missing = [s for s in SECTIONS if not sections.get(s)]
    if missing:
        return Invalid(reason=f"SKILL.md lacks sections: {', '.join(missing)}")
    examples = _examples(sections["Examples"])
    if isinstance(examples, str):
        return Invalid(reason=examples)
    data = {**front, "rules": sections["Rules"], "hints": sections["Generation hints"],
            "examples": examples, "validators": validators}  # fmt: skip
    try:
        pkg = SkillPackage.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        return Invalid(reason=f"{'.'.join(map(str, err['loc'])) or 'SKILL.md'}: {err['msg']}")
    problems = structural_problems(pkg, folder_name)
    return Invalid(reason="; ".join(problems)) if problems else pkg


def structural_problems(pkg: SkillPackage, folder_name: str | None = None) -> list[str]:
    """What is wrong with a package's shape (not its behaviour): names, tools, validator source."""
    problems = []
    if folder_name is not None and folder_name != pkg.name:
        problems.append(f"name {pkg.name!r} differs from its folder {folder_name!r}")
    if pkg.kind == "tool_use" and not pkg.tools:
        problems.append("a tool_use skill names its tools")
    if pkg.kind == "logic" and pkg.tools:
        problems.append("a logic skill uses no tools")
    problems += [f"unknown tool {t!r}" for t in pkg.tools if t not in tools.TOOLS]
    return problems + validator_problems(pkg.validators)


def load_skill(folder: Path) -> SkillPackage | Invalid:
    """Read ``folder/SKILL.md`` and ``folder/validators.py``."""
    try:
        skill_md = (folder / "SKILL.md").read_text()
        validators = (folder / "validators.py").read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return Invalid(reason=f"{folder.name}: cannot read: {exc}")
    return parse_skill(skill_md, validators, folder.name)


def load_library(root: Path = SKILLS_DIR) -> dict[str, SkillPackage]:
    """Every package under ``root``; a broken seed package is a setup error (raised, naming it)."""
    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        pkg = load_skill(folder)
        if isinstance(pkg, Invalid):
            raise ValueError(f"skill package {folder}: {pkg.reason}")
        out[pkg.name] = pkg
    return out


def save_skill(pkg: SkillPackage, root: Path) -> Path:
    """Write a package as a readable folder ``root/<name>/``."""
    folder = root / pkg.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(pkg.skill_md())
    (folder / "validators.py").write_text(pkg.validators)
    return folder


def examples_jobs(pkg: SkillPackage) -> list[Job]:
    """Sandbox jobs that run ``validate`` on each example contract (all must return [])."""
    return [
        Job(files=pkg.sandbox_files(), module="validators", function="validate", kwargs={"contract": ex.contract})
        for ex in pkg.examples
    ]
