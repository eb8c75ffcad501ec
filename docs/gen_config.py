"""Generate the configuration reference from the pydantic models (run at build time).

``render()`` walks ``ArenaConfig`` and every model reachable from its fields (nested
models, unions, lists and dicts of models), then the policy specs, the league and runner
sections and each registered game's config model, and writes one table per model:
field, type, default, description. Nothing here is written by hand: a new field, a new
default or a changed description shows up in the next build. ``docs/hooks.py`` puts the
result into ``reference/config.md`` where it says ``<!-- config-reference -->``.

    PYTHONPATH=. python docs/gen_config.py    # print the page's generated part
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation mentions (through unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [] if annotation is BaseModel else [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def _type_name(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return " | ".join(repr(m.value) for m in annotation)
        return annotation.__name__
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]" if args else name
    return str(annotation).replace("typing.", "")


def _default(field: Any) -> str:
    if field.is_required():
        return "*required*"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "*computed*"
    else:
        value = field.default
    if value is PydanticUndefined:
        return "*required*"
    if isinstance(value, BaseModel):
        return f"{type(value).__name__}()"
    if isinstance(value, enum.Enum):
        value = value.value
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _cell(text: str) -> str:
    """Plain table text: one line, pipes escaped, and <bot>-style placeholders kept as text, not HTML."""
    text = " ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    """A table cell's code span (Python-Markdown's tables leave pipes inside backticks alone)."""
    return "`" + " ".join(text.split()) + "`"


def _anchor(model: type[BaseModel]) -> str:
    return f"{model.__module__}.{model.__qualname__}".replace(".", "-").lower()


def model_table(
    model: type[BaseModel], seen: set[type[BaseModel]], out: list[str], level: int = 3,
    reserved: frozenset[type[BaseModel]] = frozenset(),
) -> None:
    """Append ``model``'s table, then the tables of the models its fields mention (except those
    in ``reserved``: the roots of later sections, which get their tables there)."""
    if model in seen:
        return
    seen.add(model)
    doc = (model.__doc__ or "").strip().split("\n\n")[0]
    out.append(f"{'#' * level} {model.__name__} {{#{_anchor(model)}}}\n")
    out.append(f"`{model.__module__}.{model.__qualname__}`" + (f": {_cell(doc)}" if doc else "") + "\n")
    nested: list[type[BaseModel]] = []
    if model.model_fields:
        out.append("| field | type | default | description |")
        out.append("|---|---|---|---|")
        for name, field in model.model_fields.items():
            models = _models_in(field.annotation)
            nested.extend(models)
            type_text = _code(_type_name(field.annotation))
            links = ", ".join(f"[{m.__name__}](#{_anchor(m)})" for m in dict.fromkeys(models))
            out.append(
                f"| `{field.alias or name}` | {type_text}{' (' + links + ')' if links else ''} | {_code(_default(field))} "
                f"| {_cell(field.description or '')} |"
            )
    else:
        out.append("*(no fields)*")
    out.append("")
    for sub in dict.fromkeys(nested):
        if sub not in reserved:
            model_table(sub, seen, out, level, reserved)


def sections() -> list[tuple[str, str, list[type[BaseModel]]]]:
    """(title, introduction, root models) of each part of the reference."""
    from arena.core.registry import GAMES, game_class
    from arena.loop.config import ArenaConfig, PlaySection, TrainConfig
    from arena.loop.components.evals import EvalSpec
    from arena.loop.components.league import LeagueConfig
    from arena.runner import RunnerSection
    from arena.learners.config import LearnerConfig
    from arena.policies.config import POLICY_KINDS

    games = [game_class(name).config_type for name in GAMES]
    return [
        ("The whole config: ArenaConfig",
         "A YAML file is one `ArenaConfig` (`arena/loop/config.py`); each section is the part's own model.",
         [ArenaConfig, TrainConfig, PlaySection]),
        ("The policy table (arena.policies.config)",
         "Each entry of `policies:` is one of these, chosen by `kind:` (`model` when absent).",
         list(POLICY_KINDS.values())),
        ("The learner (arena.learners.config)", "The `learner:` section.", [LearnerConfig]),
        ("The runner", "The `runner:` section.", [RunnerSection]),
        ("The league and evaluations inside training",
         "`train.league` and the entries of `train.evals`.", [LeagueConfig, EvalSpec]),
        ("The games (each game's config model, from the registry)",
         "The `game:` section: `name` plus the game's own settings. "
         "Every game's model extends `GameConfig` (`invalid`, `max_turns`). Registered games: "
         + ", ".join(f"`{name}`: [{game_class(name).config_type.__name__}](#{_anchor(game_class(name).config_type)})"
                     for name in GAMES) + ".",
         games),
    ]


def render() -> str:
    out: list[str] = []
    seen: set[type[BaseModel]] = set()
    parts = sections()
    for i, (title, intro, roots) in enumerate(parts):
        later = frozenset(m for _, _, rest in parts[i + 1:] for m in rest)
        out.append(f"## {title}\n")
        out.append(intro + "\n")
        for model in roots:
            model_table(model, seen, out, reserved=later)
    return "\n".join(out)


if __name__ == "__main__":
    print(render())
