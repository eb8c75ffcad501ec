"""The league's pool as data: its members, the rules that draw the step's opponent, and ``train.league``'s
config model (the league itself: arena/loop/components/league.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

OPPONENT = "league"
BASE = "base"


@dataclass(frozen=True)
class Member:
    name: str
    model: str  # a model name or folder the policy table resolves
    step: int
    policy: str = ""  # the trainable policy whose past this is ("": the run's only trainable policy)


# ------------------------------------------------------------------ samplers
Sampler = Callable[[Sequence[Member], Mapping[str, tuple[float, float]], np.random.Generator, float], Member]


def latest(members: Sequence[Member], stats: Mapping[str, tuple[float, float]], rng: np.random.Generator, power: float) -> Member:
    """The newest member."""
    return max(members, key=lambda m: m.step)


def uniform(members: Sequence[Member], stats: Mapping[str, tuple[float, float]], rng: np.random.Generator, power: float) -> Member:
    """Every member equally likely."""
    return members[int(rng.integers(len(members)))]


def pfsp_weights(members: Sequence[Member], stats: Mapping[str, tuple[float, float]], power: float) -> np.ndarray:
    """``(1 - w)^power`` with ``w = (wins + 1) / (games + 2)``, normalised."""
    w = np.array([(stats.get(m.name, (0.0, 0.0))[0] + 1) / (stats.get(m.name, (0.0, 0.0))[1] + 2) for m in members])
    raw = (1.0 - w) ** power
    return raw / raw.sum()


def pfsp(members: Sequence[Member], stats: Mapping[str, tuple[float, float]], rng: np.random.Generator, power: float) -> Member:
    """Prioritised fictitious self-play: members the learner beats less often are drawn more."""
    return members[int(rng.choice(len(members), p=pfsp_weights(members, stats, power)))]


SAMPLERS: dict[str, Sampler] = {"latest": latest, "uniform": uniform, "pfsp": pfsp}


def is_opponent(policy: str) -> bool:
    """A league member's policy name: ``league``, or ``league/<member>`` in a rated match served at once."""
    return policy == OPPONENT or policy.startswith(OPPONENT + "/")


def is_bot(member: Member) -> bool:
    """A scripted opponent (``train.league.bots``), not a checkpoint."""
    return member.model.startswith("scripted:")


def is_base(member: Member) -> bool:
    """A trainable policy's starting model (``base``, or ``<policy>/base`` with several trainable policies)."""
    return member.name.rsplit("/", 1)[-1] == BASE


class LeagueConfig(BaseModel):
    """An opponent pool of past checkpoints inside training, and rated matches. Off by default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="Play some seats with past checkpoints and rate the run against them.")
    pool_size: int = Field(default=4, ge=0, description="Past checkpoints kept in the pool (per trainable policy), besides the base model "
                           "(independent of keep_checkpoints); 0: no checkpoint joins it (a pool of the bots, and base "
                           "if include_base).")
    include_base: bool = Field(default=True, description="The starting model is a member ('base', the ratings' anchor).")
    bots: list[str] = Field(default_factory=list, description="Scripted opponents that are members for the whole run, "
                            "e.g. [scripted:cfr, scripted:random] (games/openspiel): drawn and rated like checkpoints, "
                            "never pruned; a bot the game does not have is a one-line error at start-up.")
    share: float = Field(default=0.25, ge=0.0, le=1.0, description="Share of the trainable seats of each game given to "
                         "the step's pool opponent (at least one when > 0, never all); 0: rated matches only.")
    sampler: str = Field(default="pfsp", description="Rule drawing the step's opponent: latest | uniform | pfsp.")
    pfsp_power: float = Field(default=2.0, ge=0.0, description="pfsp: weight (1 - learner's win rate)^power.")
    eval_every: int = Field(default=0, ge=0, description="Steps between rated matches against the pool and base (0: never).")
    eval_games: int = Field(default=8, ge=1, description="Games against each member in a rated match (whole rounds).")
    bootstrap: int = Field(default=200, ge=0, description="Bootstrap resamples of the rating's 95% interval.")
    layouts: list[dict[str, Any]] = Field(default_factory=list, description="Reset options fixing the roles in rated "
                                          "matches, cycled per round (SpyRL: [{spy: 0}, {spy: 1}, ...]).")

    @model_validator(mode="after")
    def _known_sampler(self) -> LeagueConfig:
        for bot in self.bots:
            if not bot.startswith("scripted:") or bot == "scripted:":
                raise ValueError(f"bots: {bot!r} is not a scripted opponent; write scripted:<bot>, e.g. scripted:cfr")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)} (got {self.sampler!r})")
        return self


# ------------------------------------------------------------------ the league
