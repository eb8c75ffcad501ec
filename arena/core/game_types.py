"""The small types a game is made of: phases, invalid output, the config base, reset options, state.

They live apart from :class:`~arena.core.game.LLMGame` so that rules modules can
import ``Invalid`` without the env machinery; ``arena.core.game`` re-exports them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import ChatMessage, Episode


class Invalid(BaseModel):
    """What ``parse`` returns for text that is not a legal action."""

    model_config = ConfigDict(frozen=True)
    reason: str


class InvalidOutputConfig(BaseModel):
    """How a game treats a completion it cannot parse."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["na", "penalty", "retry"] = Field(
        default="na",
        description="na: treat as abstention; penalty: abstention plus `penalty` on the turn; "
        "retry: ask again up to `retries` times, then as penalty.",
    )
    penalty: float = Field(default=-1.0, description="Reward added to an invalid turn (penalty/retry modes).")
    retries: int = Field(default=1, ge=0, le=10, description="Extra attempts per seat and phase (retry mode).")


class GameConfig(BaseModel):
    """Base of every game's config: the settings the framework itself reads."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    invalid: InvalidOutputConfig = Field(default_factory=InvalidOutputConfig, description="Unparseable output.")
    max_turns: int | None = Field(
        default=None, ge=1, description="Step limit: the episode ends as a truncation after this many turns."
    )


class NoOptions(BaseModel):
    """Reset options of a game that takes none."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Phase:
    """A stage of the game in which ``seats`` act once each, in order.

    * ``hidden`` (default **True**: a phase is secret unless it says otherwise):
      while the phase is open no seat can read another's output from it
      (:meth:`LLMGame.outputs` refuses), and its pending seats are generated in one
      batch. ``hidden=False`` makes a *public* phase: seats act in turn and a later
      seat may be shown what earlier seats wrote (``outputs(name)`` on the open
      phase returns the replies so far).
    * ``sealed``: a hidden phase whose outputs stay secret after it closes:
      ``"episode"`` until the episode ends, ``"forever"`` even in the final
      observations. The base does not enforce it (the game's own ``close_phase``
      reads the actions); the conformance kit checks that neither the text nor a
      value parsed from it reaches another seat's observation or prompt.
    * ``free_text``: any reply is a legal action in this phase (a description, an
      answer, or a verdict whose unparseable form has a declared score). Otherwise the kit feeds replies nobody could parse (empty, control
      characters) and requires ``parse`` to return :class:`Invalid` for them, so an
      unparseable reply is never silently turned into a default action.
    * ``audience``: replies addressed to some seats only (a private offer, a
      whisper): writer seat -> the seats that may see its reply (the writer always
      may; a seat of the phase left out writes for itself alone). The kit varies one
      writer's reply and requires that no seat outside its audience sees a
      difference, from the reply until the episode ends (also in the final views
      with ``sealed="forever"``). A hidden phase still shows nothing to anyone while
      it is open; a public one (``hidden=False``) may show a reply to its audience
      at once. The base does not filter: ``observe_seat`` shows a seat the replies
      that :meth:`may_see` allows (``outputs``/``actions`` return every reply).
    * ``addressed``: each reply names its own audience (a direct message "to bob:
      ...", an offer to a seat of the writer's choosing): the game's
      ``reply_audience(seat, action)`` returns the seats that may see it, read after
      each reply is parsed (:meth:`LLMGame.reply_seen_by`); the kit then checks it as
      it checks ``audience``. Not with ``audience`` (one of the two says who may see).
    """

    name: str
    seats: tuple[str, ...]
    hidden: bool = True
    sealed: Literal["episode", "forever"] | None = None
    free_text: bool = False
    audience: Mapping[str, Sequence[str]] | None = field(default=None, hash=False)
    addressed: bool = False

    def __post_init__(self) -> None:
        if self.addressed and self.audience is not None:
            raise ValueError(f"phase {self.name!r}: give audience (fixed when the phase opens) or addressed=True "
                             "(each reply names its audience through reply_audience), not both")
        if self.sealed not in (None, "episode", "forever"):
            raise ValueError(f"phase {self.name!r}: sealed must be 'episode', 'forever' or None (got {self.sealed!r})")
        if self.sealed and not self.hidden and self.audience is None and not self.addressed:
            raise ValueError(
                f"phase {self.name!r}: a sealed phase must be hidden (hidden=True) or declare who may see each reply "
                "(audience=...)"
            )
        if self.audience is not None:
            if isinstance(self.audience, str) or not isinstance(self.audience, Mapping):
                raise ValueError(
                    f"phase {self.name!r}: audience maps each writer seat to the seats that may see its reply, "
                    f"e.g. {{'seat_0': ['seat_1']}} (got {self.audience!r})"
                )
            strangers = sorted(set(self.audience) - set(self.seats))
            if strangers:
                raise ValueError(
                    f"phase {self.name!r}: audience names writer(s) {', '.join(strangers)} who do not act in it "
                    f"(its seats: {', '.join(self.seats)})"
                )
            for writer, seen_by in self.audience.items():
                if isinstance(seen_by, str):
                    raise ValueError(
                        f"phase {self.name!r}: audience[{writer!r}] must be a list of seats, not the string "
                        f"{seen_by!r} (write [{seen_by!r}])"
                    )
            # Normalised once (a frozen dataclass); a plain dict, so a phase still pickles and deep-copies.
            object.__setattr__(self, "audience", {w: tuple(v) for w, v in self.audience.items()})

    def may_see(self, viewer: str, writer: str) -> bool:
        """Whether ``viewer`` may be shown ``writer``'s reply in this phase by its ``audience`` (True without one)."""
        if self.audience is None or viewer == writer:
            return True
        return viewer in self.audience.get(writer, ())

    @property
    def kept_until(self) -> Literal["episode", "forever"] | None:
        """How long a reply stays with the seats allowed to see it after the phase closes: ``sealed``, else
        ``"episode"`` for a phase with an ``audience`` or ``addressed`` (a private message stays private), else None."""
        return self.sealed or ("episode" if self.audience is not None or self.addressed else None)


@dataclass(frozen=True)
class ActionQuery:
    """One decision point for :meth:`LLMGame.policy_metrics`: the prompt ``seat`` sees there and
    the completion texts of its legal actions, whose probabilities are asked for."""

    seat: str
    messages: list[ChatMessage]
    observation: Any
    actions: tuple[str, ...]


#: Probabilities of each query's actions (each row sums to 1), handed in by the loop (a game never
#: builds a model): a model's teacher-forced likelihood of each action text, normalised over the
#: actions; a scripted bot's own distribution.
ActionProbs = Callable[[Sequence[ActionQuery]], list[list[float]]]


class TextGenerator(Protocol):
    """A policy's text generation, handed to :meth:`GameState.update` by the loop (a game never
    builds or imports a model): one batched call, chat ``i`` is request ``i``, seeded ``seed + i``;
    returns the texts in order (``arena.runner.generate_texts`` bound to a policy)."""

    def __call__(
        self, chats: Sequence[list[ChatMessage]], *, temperature: float, max_new_tokens: int, seed: int, seat: str = "",
    ) -> list[str]: ...


class GameState(ABC):
    """State that lives across episodes (a skill library, an opponent pool).

    One object serves every env of a run. Rollouts read :meth:`snapshot`, a frozen
    value taken when a batch of games starts, so games of one batch see the same
    state and a seeded game replays byte for byte. After each training step the
    trainer calls :meth:`update` with that step's episodes; it returns metrics.
    :meth:`save` / :meth:`load` write readable files into a checkpoint folder.
    """

    @abstractmethod
    def snapshot(self) -> Any:
        """An immutable view of the state for the envs (never mutated afterwards)."""

    @abstractmethod
    def update(self, episodes: Sequence[Episode], policies: Mapping[str, TextGenerator]) -> dict[str, float]:
        """Evolve after a step; return metrics (logged under ``state/``). ``policies``: each policy's
        text generation by name, for a state's own model calls (Skill-SP's library evolution)."""

    @abstractmethod
    def save(self, folder: Path) -> None:
        """Write the state as readable files into ``folder`` (it exists)."""

    @abstractmethod
    def load(self, folder: Path) -> None:
        """Restore exactly what :meth:`save` wrote."""
