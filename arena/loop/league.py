"""A league inside ``arena.train``: past checkpoints as opponents, and rated matches against them.

Off by default; ``train.league.enabled: true`` turns it on (``LeagueConfig``
in ``arena/loop/config.py`` documents every key).

Pool
    The base model (the trainable policy's starting weights, named ``base``)
    plus the newest ``pool_size`` checkpoints. Each checkpoint save adds the
    current weights as member ``step_NNNNNN``, written to
    ``<run>/league/pool/step_NNNNNN`` (its own retention, independent of
    ``keep_checkpoints``). The pool's state (members, results against each,
    the rating history) is a readable ``league/state.json`` inside every
    checkpoint and is restored with it; a member's weights are deleted only
    once no kept checkpoint names it, so a resume from any kept checkpoint
    finds its whole pool.

Opponents in training
    Each step draws ONE member by the named rule (registry ``SAMPLERS``):
    ``latest`` (the newest), ``uniform``, ``pfsp`` (prioritised fictitious
    self-play: weight ``(1 - w)^p``, ``w`` the learner's smoothed win rate
    ``(wins + 1) / (games + 2)`` against that member, so the members it beats
    less often are drawn more). In every game of the step, ``round(share * k)``
    of the ``k`` seats that play the trainable policy (at least one when share
    > 0, never all) are given to policy ``league`` = that member; the seats are
    drawn per game. Draws are seeded by (train.seed, step), so a resumed run
    draws the same. Opponent turns carry policy ``league``: they are never
    trained and are counted apart under ``league/`` in the metrics.

Rated matches
    Every ``eval_every`` steps the current policy plays ``eval_games`` games
    against each member (``base`` first), seated by :mod:`arena.stats.seating` on
    the trainable seats with ``layouts`` (reset options fixing the roles), on
    held-out seeds. A Bradley-Terry fit of those games (anchor ``base`` = 1000,
    95% bootstrap interval, :mod:`arena.stats.ratings`) gives ``league/rating``,
    ``league/rating_low``, ``league/rating_high``: metrics.jsonl, TensorBoard
    and the plot show whether the run still improves against its past.

Memory
    Members are loaded on demand: one member at a time holds a model in
    memory (the step's opponent; the rated match plays member after member),
    built from its folder with the trainable policy's settings (backend hf)
    and freed when the next one is loaded. So a pool of any size costs one
    extra model in memory, plus disk.

Members as adapters (issue #36)
    When the trainable policy is a LoRA adapter served by vLLM, a checkpoint
    member is an adapter too, and the assembly hands in ``together=True`` with a
    ``make_policy`` that serves members on the trainable policy's own engine
    (``arena.loop.assemble.league_member_policy``): the step's opponent costs an
    adapter slot, not a model, and its turns go out in the same generate call
    as the trainable policy's. The rated match then seats every member at once,
    each as policy ``league/<member>``, so one tick is one call for the current
    policy and all members together.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
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


class LeagueConfig(BaseModel):
    """An opponent pool of past checkpoints inside training, and rated matches. Off by default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="Play some seats with past checkpoints and rate the run against them.")
    pool_size: int = Field(default=4, ge=0, description="Past checkpoints kept in the pool, besides the base model "
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
class League:
    """Pool, opponent draws, results and ratings of one training run (see the module docstring)."""

    def __init__(self, cfg: Any, run_dir: Path, runner: Any, make_policy: Callable[[Any, str], Any],
                 together: bool = False):
        """``make_policy(spec, name)``: a policy for a model spec, handed in by the trainer (the assembly's
        ``arena.loop.build.make_model_policy``; the league's config model sits below the assembly).
        ``together``: members cost an adapter each, so the rated match serves them all at once."""
        from arena.core.errors import ConfigError

        self.cfg = cfg
        self.lc = cfg.train.league
        if self.lc.sampler not in SAMPLERS:
            raise ConfigError(f"train.league.sampler: unknown rule {self.lc.sampler!r}; known: {', '.join(SAMPLERS)}")
        self.run_dir = run_dir
        self.runner = runner
        self.make_policy = make_policy
        self.together = together
        self.trainable = cfg.trainable
        self.spec = cfg.policies[cfg.trainable]
        self.seat_rules = dict(cfg.seat_table())
        seats = runner.envs[0].possible_agents
        self.learner_seats = [s for s in seats if runner.seats.policy_for(s) == self.trainable]
        self.members: list[Member] = [Member(BASE, self.spec.model, 0)] if self.lc.include_base else []
        self.members += [Member(bot, bot, 0) for bot in dict.fromkeys(self.lc.bots)]  # fixed: never pruned
        for bot in self.lc.bots:  # a typo fails here, before any game
            self.make_policy(bot, OPPONENT)
        self.stats: dict[str, tuple[float, float]] = {}  # member -> (learner's wins, games), ties count half
        self.ratings: list[dict[str, float]] = []
        self.loaded: str | None = None
        self.current: Member | None = None  # this step's opponent
        sampling = runner.sampling  # the opponent samples like the trainable policy
        runner.sampling = lambda policy, phase: sampling(self.trainable if is_opponent(policy) else policy, phase)

    # -------------------------------------------------------------- pool
    def pool_dir(self) -> Path:
        return self.run_dir / "league" / "pool"

    def add_member(self, step: int, model: Any, tokenizer: Any) -> None:
        """The current weights join the pool as ``step_NNNNNN``; the oldest checkpoint member leaves (with
        ``pool_size: 0`` nothing is written and nothing joins)."""
        if self.lc.pool_size == 0:
            return
        name = f"step_{step:06d}"
        final = self.pool_dir() / name
        tmp = self.pool_dir() / f".tmp-{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        self.members = [m for m in self.members if m.name != name] + [Member(name, f"league/pool/{name}", step)]
        past = [m for m in self.members if m.name != BASE and not is_bot(m)]
        for old in past[: max(0, len(past) - self.lc.pool_size)]:
            self.members.remove(old)
            self.stats.pop(old.name, None)

    def prune(self, checkpoints: Sequence[Path]) -> None:
        """Delete member folders that neither the pool nor any kept checkpoint names."""
        keep = {m.name for m in self.members}
        for ckpt in checkpoints:
            state = ckpt / "league" / "state.json"
            if state.is_file():
                keep |= {m["name"] for m in json.loads(state.read_text())["members"]}
        if self.pool_dir().is_dir():
            for folder in self.pool_dir().iterdir():
                if folder.name not in keep:
                    shutil.rmtree(folder, ignore_errors=True)

    def activate(self, member: Member) -> None:
        """Load ``member`` as policy ``league`` (the previous one is dropped first: one in memory)."""
        if self.loaded == member.name and OPPONENT in self.runner.policies:
            return
        self.runner.policies.pop(OPPONENT, None)
        self.loaded = None
        self.runner.policies[OPPONENT] = self.member_policy(member, OPPONENT)
        self.loaded = member.name

    def member_policy(self, member: Member, name: str) -> Any:
        """``member`` as a policy named ``name``: a bot, or its folder with the trainable policy's settings."""
        if is_bot(member):  # a scripted opponent: make_policy takes its "scripted:<bot>" name
            return self.make_policy(member.model, name)
        model = member.model if member.name == BASE else str(self.run_dir / member.model)  # members live in the run
        spec = self.spec.model_copy(update={"model": model, "trainable": False, "frozen": True, "backend": "hf"})
        return self.make_policy(spec, name)

    # -------------------------------------------------------------- training games
    def _rng(self, step: int, salt: int) -> np.random.Generator:
        return np.random.default_rng([self.cfg.train.seed, step, salt])

    def draw(self, step: int) -> Member | None:
        if not self.members or self.lc.share == 0 or len(self.learner_seats) < 2:
            return None
        return SAMPLERS[self.lc.sampler](self.members, self.stats, self._rng(step, 0), self.lc.pfsp_power)

    def opponent_count(self) -> int:
        k = len(self.learner_seats)
        return min(k - 1, max(1, round(self.lc.share * k))) if self.lc.share > 0 else 0

    def assign(self, step: int, specs: Sequence[Any]) -> list[Any]:
        """The step's games with the drawn member in some trainable seats of each game."""
        from arena.runner import EpisodeSpec, SeatMap

        member = self.draw(step)
        self.current = member
        if member is None:
            return list(specs)
        self.activate(member)
        rng = self._rng(step, 1)
        out = []
        for spec in specs:
            chosen = rng.choice(len(self.learner_seats), size=self.opponent_count(), replace=False)
            rules = {self.learner_seats[int(k)]: OPPONENT for k in sorted(chosen)} | self.seat_rules
            out.append(EpisodeSpec(seed=spec.seed, options=spec.options, seats=SeatMap(rules)))
        return out

    def after_step(self, step: int, episodes: Sequence[Any]) -> dict[str, float]:
        """Results against this step's member, and a rated match every ``eval_every`` steps (``league/`` metrics)."""
        row = self._record(episodes)
        if self.lc.eval_every and step % self.lc.eval_every == 0:
            row |= self.rated_match(step)
        return row

    def _record(self, episodes: Sequence[Any]) -> dict[str, float]:
        member = self.current
        row: dict[str, float] = {"league/pool_size": float(len(self.members))}
        if member is None:
            return row
        scores, opp_rewards, opp_turns = [], [], 0
        for ep in episodes:
            by_seat = {t.seat: t.policy for t in ep.turns}
            opp = [s for s, p in by_seat.items() if p == OPPONENT]
            mine = [s for s, p in by_seat.items() if p == self.trainable]
            opp_turns += sum(t.policy == OPPONENT for t in ep.turns)
            opp_rewards += [ep.rewards.get(s, 0.0) for s in opp]
            pairs = [1.0 if ep.outcome[a].rank < ep.outcome[b].rank else 0.0 if ep.outcome[a].rank > ep.outcome[b].rank
                     else 0.5 for a in mine for b in opp if a in ep.outcome and b in ep.outcome]
            if pairs:
                scores.append(float(np.mean(pairs)))
        wins, games = self.stats.get(member.name, (0.0, 0.0))
        self.stats[member.name] = (wins + sum(scores), games + len(scores))
        row |= {"league/opponent_step": float(member.step), "league/opponent_turns": float(opp_turns),
                "league/score_vs_opponent": float(np.mean(scores)) if scores else math.nan,
                "league/opponent_reward": float(np.mean(opp_rewards)) if opp_rewards else math.nan}
        return row

    # -------------------------------------------------------------- rated matches
    def rated_match(self, step: int) -> dict[str, float]:
        """The current policy against every member on held-out seeds; its Bradley-Terry rating vs base."""
        from arena.runner import EpisodeSpec, SeatMap
        from arena.stats.heldout import held_out_seeds
        from arena.stats.ratings import bradley_terry, game_from_outcome
        from arena.stats.seating import schedule

        if not self.members or len(self.learner_seats) < 2:
            return {}
        games = []
        layouts = self.lc.layouts or [{}]
        n = len(self.learner_seats)
        rounds = math.ceil(self.lc.eval_games / n)
        batch: list[tuple[Any, Any]] = []  # (table, spec) of the members served at once
        for k, member in enumerate(self.members):
            name = f"{OPPONENT}/{member.name}" if self.together else OPPONENT
            if self.together:
                self.runner.policies[name] = self.member_policy(member, name)
            else:
                self.activate(member)
            tables = schedule(["current", member.name], self.learner_seats, rounds, seed=step, layouts=layouts)
            seeds = held_out_seeds(1000 + step * 64 + k, len(tables))
            batch += [(t, EpisodeSpec(seed=s, options=dict(t.options), seats=SeatMap(
                {seat: self.trainable if p == "current" else name for seat, p in t.seating.items()} | self.seat_rules)))
                for t, s in zip(tables, seeds, strict=True)]
            if not self.together or k == len(self.members) - 1:  # one member at a time, or all of them at once
                for (t, _), ep in zip(batch, self.runner.play([spec for _, spec in batch]), strict=True):
                    games.append(game_from_outcome(dict(t.seating), ep.roles, ep.outcome))
                batch = []
        for member in self.members if self.together else ():
            self.runner.policies.pop(f"{OPPONENT}/{member.name}", None)
        anchor = BASE if any(m.name == BASE for m in self.members) else self.members[0].name
        names = [m.name for m in self.members] + ["current"]
        fit = bradley_terry(games, names, anchor=anchor, rounds=self.lc.bootstrap, seed=step)
        entry = {"step": float(step), "rating": fit.rating["current"], "low": fit.low["current"],
                 "high": fit.high["current"], "games": float(len(games))}
        self.ratings.append(entry)
        return {"league/rating": entry["rating"], "league/rating_low": entry["low"], "league/rating_high": entry["high"],
                "league/rated_games": entry["games"]}

    # -------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        return {"members": [m.__dict__ for m in self.members], "stats": {k: list(v) for k, v in self.stats.items()},
                "ratings": self.ratings}

    def save(self, folder: Path) -> None:
        (folder / "state.json").write_text(json.dumps(self.state(), indent=2))

    def load(self, folder: Path) -> None:
        data = json.loads((folder / "state.json").read_text())
        self.members = [Member(**m) for m in data["members"]]
        self.stats = {k: (float(v[0]), float(v[1])) for k, v in data["stats"].items()}
        self.ratings = list(data["ratings"])
        self.loaded = None
