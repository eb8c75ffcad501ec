"""Typed messages and the gymnasium spaces that hold them.

Games speak pydantic models, not NumPy arrays. PettingZoo's ``api_test`` still
works on them because:

* :class:`MessageSpace` is a real ``gymnasium.Space`` whose ``contains`` validates a
  message and whose ``sample`` builds a valid random one;
* a message carries ``dtype = None``, the same as the space, because ``api_test``
  compares ``observation_space.dtype == observation.dtype`` for non-Dict spaces;
* :class:`CompletionSpace` is the action space: every ``str`` is a legal action
  (the completion text), and ``sample`` mixes the game's well-formed examples
  with random unicode, so conformance tests feed games both.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import gymnasium
import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound="Message")


class Message(BaseModel):
    """Base of every typed observation and action: immutable, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # gymnasium/PettingZoo compare ``space.dtype == obs.dtype``; neither has one.
    dtype: ClassVar[None] = None


# Characters random completions are drawn from: ASCII, whitespace, Latin-1,
# CJK, emoji, plus the markup games parse, so parsers meet near-misses too.
_ALPHABETS: tuple[tuple[int, int], ...] = (
    (0x20, 0x7E),
    (0xA0, 0x17F),
    (0x370, 0x3FF),
    (0x4E00, 0x4FFF),
    (0x1F300, 0x1F64F),
)
_FRAGMENTS = ("\\boxed{", "}", "{", "Answer:", "\n", "N/A", "\\", "[", "]", " ", "*")


def random_text(rng: np.random.Generator, max_length: int = 64) -> str:
    """A random string: any mix of unicode, whitespace and parser-looking fragments."""
    length = int(rng.integers(0, max_length + 1))
    parts: list[str] = []
    while sum(map(len, parts)) < length:
        if rng.random() < 0.15:
            parts.append(_FRAGMENTS[int(rng.integers(len(_FRAGMENTS)))])
        else:
            lo, hi = _ALPHABETS[int(rng.integers(len(_ALPHABETS)))]
            parts.append(chr(int(rng.integers(lo, hi + 1))))
    return "".join(parts)[:length]


class CompletionSpace(gymnasium.Space[str]):
    """The action space of an LLM seat: any string is a legal completion.

    ``sample`` returns one of ``examples`` (well-formed actions the game suggests)
    half of the time and random unicode otherwise.
    """

    def __init__(self, examples: Sequence[str] = (), max_length: int = 64, seed: int | None = None):
        self.examples = tuple(examples)
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise ValueError("CompletionSpace.sample takes no mask: every string is legal")
        if self.examples and self.np_random.random() < 0.5:
            return self.examples[int(self.np_random.integers(len(self.examples)))]
        return random_text(self.np_random, self.max_length)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompletionSpace) and other.examples == self.examples

    def __repr__(self) -> str:
        return f"CompletionSpace({len(self.examples)} examples)"


class MessageSpace(gymnasium.Space[M], Generic[M]):
    """A space of one pydantic message type.

    ``contains`` accepts an instance of the type that re-validates; ``sample``
    draws a valid random instance, from ``sampler(rng)`` when the game gives one
    (field constraints a generic builder cannot guess), else field by field.
    """

    def __init__(
        self,
        message_type: type[M],
        sampler: Callable[[np.random.Generator], M] | None = None,
        seed: int | None = None,
    ):
        self.message_type = message_type
        self.sampler = sampler
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, self.message_type):
            return False
        try:
            self.message_type.model_validate(x.model_dump())
        except ValidationError:
            return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> M:
        if mask is not None or probability is not None:
            raise ValueError("MessageSpace.sample takes no mask")
        if self.sampler is not None:
            return self.sampler(self.np_random)
        return self.message_type.model_validate(random_fields(self.message_type, self.np_random))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageSpace) and other.message_type is self.message_type

    def __repr__(self) -> str:
        return f"MessageSpace({self.message_type.__name__})"


def random_fields(model: type[BaseModel], rng: np.random.Generator) -> dict[str, Any]:
    return {
        name: _random_value(field.annotation, rng)
        for name, field in model.model_fields.items()
        if field.is_required() or rng.random() < 0.5
    }


def _random_value(annotation: Any, rng: np.random.Generator) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return args[int(rng.integers(len(args)))]
    if origin in (typing.Union, types.UnionType):
        return _random_value(args[int(rng.integers(len(args)))], rng)
    if origin in (list, tuple, set, frozenset, Sequence):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return tuple(_random_value(a, rng) for a in args)
        return [_random_value(args[0] if args else str, rng) for _ in range(int(rng.integers(0, 4)))]
    if origin is dict:
        return {str(_random_value(args[0], rng)): _random_value(args[1], rng) for _ in range(int(rng.integers(0, 3)))}
    if annotation is type(None):
        return None
    if annotation is bool:
        return bool(rng.integers(2))
    if annotation is int:
        return int(rng.integers(0, 10))
    if annotation is float:
        return float(rng.random())
    if annotation is str:
        return random_text(rng, 32)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        members = list(annotation)
        return members[int(rng.integers(len(members)))]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return random_fields(annotation, rng)
    raise TypeError(f"cannot sample a value of type {annotation!r}; give MessageSpace a sampler")
