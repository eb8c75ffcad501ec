"""SpyRL's typed settings, reset options and observations (see ``arena/games/spy/__init__.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from arena.core.game import GameConfig
from arena.core.messages import Message

DEFAULT_MASK_RATIO = {"summary": 0.2, "story": 0.2, "math": 0.4}
DEFAULT_WORDS = {"summary": (None, 500), "story": (300, 500), "math": (None, None)}


class SpyConfig(GameConfig):
    """Settings of one SpyRL game; defaults follow the paper."""

    n_players: int = Field(default=5, ge=3, le=16, description="Players including the spy (paper 5, code 4).")
    task: Literal["summary", "story", "math"] = Field(default="summary", description="What every player does.")
    data_path: str | None = Field(default=None, description="User JSONL of sources; default: built-in data.")
    mask: Literal["span", "fact"] = Field(
        default="span", description="What the spy's copy lacks. span: one contiguous span of mask_ratio of the "
        "units (paper); fact: one number (else one name) wherever it appears, a variant for models that cannot "
        "tell answers from a full and a span-masked copy apart (not the paper's; a source with neither: a span).",
    )
    mask_ratio: float | None = Field(
        default=None, gt=0.0, lt=1.0, description="Share of the source masked for the spy; None: 0.2 / 0.4 (math)."
    )
    mask_unit: Literal["words", "chars"] = Field(default="words", description="Unit of the masked span.")
    mask_token: str = Field(default="*", min_length=1, max_length=8, description="Replaces each masked unit.")
    min_words: int | None = Field(default=None, ge=1, description="Length asked of outputs; None: task default.")
    max_words: int | None = Field(default=None, ge=1, description="Length asked of outputs; None: task default.")
    require_answer_line: bool = Field(default=True, description="Performing output must have an 'Answer:' line.")
    vote_format: Literal["boxed", "lenient"] = Field(
        default="boxed", description="boxed: only \\boxed{k} (paper); lenient: also the last 'Player k' / 'N/A' mentioned."
    )
    shuffle_outputs: bool = Field(default=False, description="Show outputs to voters in a random order.")
    detector: Literal["players", "god"] = Field(
        default="players", description="players: everyone votes (paper); god: separate full-view detectors (code)."
    )
    god_samples: int = Field(default=8, ge=1, le=32, description="Detector seats when detector is god (8 / 4 math).")
    detection_reward: Literal["paper", "shaped"] = Field(default="paper", description="paper: 1[v == u]; shaped: code.")
    beta: float = Field(default=0.1, ge=0.0, description="Weight of the spy term of the performing reward.")
    lam: float = Field(default=0.1, ge=0.0, alias="lambda", description="Weight of the civilian term.")

    @field_validator("data_path")
    @classmethod
    def _data_readable(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            return path
        from arena.games.tasks import make_source

        try:  # read it now: a bad file is a config error at start-up, not a crash mid-run
            make_source(info.data.get("task", "summary"), path)
        except FileNotFoundError:
            raise ValueError(f"no such file {path!r}") from None
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read {path!r}: {e}") from None
        return path

    @field_validator("mask_token")
    @classmethod
    def _visible_token(cls, token: str) -> str:
        # A whitespace token would silently delete the masked words (the spy could not see
        # that anything is missing) or split one masked word into several.
        if any(c.isspace() for c in token):
            raise ValueError("must not contain whitespace; use a visible token such as '*'")
        return token

    @model_validator(mode="after")
    def _fact_has_no_span(self) -> SpyConfig:
        if self.mask == "fact":
            for key in ("mask_ratio", "mask_unit"):
                if key in self.model_fields_set:
                    raise ValueError(f"{key}: {getattr(self, key)!r} sizes a masked span and has no effect with "
                                     "mask: fact (one number or name hidden); drop it or use mask: span")
        return self

    @model_validator(mode="after")
    def _words_ordered(self) -> SpyConfig:
        lo, hi = self.word_range
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_words ({lo}) must not exceed max_words ({hi})")
        return self

    @property
    def ratio(self) -> float:
        return self.mask_ratio if self.mask_ratio is not None else DEFAULT_MASK_RATIO[self.task]

    @property
    def word_range(self) -> tuple[int | None, int | None]:
        lo, hi = DEFAULT_WORDS[self.task]
        return (self.min_words if self.min_words is not None else lo, self.max_words or hi)


class SpyOptions(BaseModel):
    """What ``reset(options=...)`` may fix for one game (tournaments rotate the spy)."""

    model_config = ConfigDict(extra="forbid")

    spy: int | None = Field(default=None, ge=0, description="Index of the spy player; None: drawn uniformly.")
    source_id: str | None = Field(default=None, description="Id of the source to play (corpus tasks); None: drawn.")


class SpyObservation(Message):
    """What one seat sees. ``outputs`` stay empty until the vote phase."""

    phase: Literal["perform", "vote", "done"]
    role: Literal["spy", "civilian", "detector"]
    seat_index: int = Field(ge=0)
    n_players: int = Field(ge=2)
    task: Literal["summary", "story", "math"]
    view: str
    mask_token: str = "*"
    mask: Literal["span", "fact"] = "span"
    min_words: int | None = None
    max_words: int | None = None
    outputs: tuple[str, ...] = ()
    output_players: tuple[int, ...] = ()


