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

Several trainable policies
    Each trainable policy has its own pool: ``<policy>/base``, the bots
    (``<policy>/scripted:cfr``) and its own checkpoints (``<policy>/step_NNNNNN``
    in ``league/pool/<policy>/``, ``pool_size`` each). Each step draws one
    member per policy (salted by the policy's index); in every game
    ``round(share * K)`` of all ``K`` trainable seats are drawn and each is
    played by the member of the policy that owns it, as policy
    ``league/<policy>``. Results count the current policies' seats against the
    member's (``league/<policy>/...`` metrics). A rated match seats each member
    in one seat of its own policy and the current policies in the others
    (:meth:`League.own_seat_tables`). One member per policy is in memory.

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
    (``league_member_policy``): the step's opponent costs an
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
from pathlib import Path
from typing import Any

import numpy as np
from arena.loop.component import Component, StepContext
from arena.loop.components.league_pool import (  # noqa: F401 - the pool's names, imported from here too
    BASE, OPPONENT, SAMPLERS, LeagueConfig, Member, is_base, is_bot, is_opponent, latest, pfsp, pfsp_weights, uniform,
)

class League(Component):
    """Pool, opponent draws, results and ratings of one training run (see the module docstring)."""

    name = "league"
    section = LeagueConfig
    section_default = LeagueConfig
    section_doc = "Opponent pool and rated matches (off by default; arena/loop/components/league.py, league_pool.py)."
    trained: Sequence[Any] = ()  # the run's trainable units, whose weights join the pool at each checkpoint

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        """Rated matches' layouts are the game's reset options (strict here; a reset only warns); a league that
        plays nobody is refused."""
        from pydantic import ValidationError

        from arena.core.errors import ConfigError, format_validation_error

        lc = cfg.train.league
        for k, layout in enumerate(lc.layouts):
            try:
                type(env).validate_options(layout)
            except ValidationError as e:
                raise ConfigError(f"{origin}: {format_validation_error(e, f'train.league.layouts.{k}')}") from None
        if not lc.enabled:
            return
        if lc.pool_size == 0 and not lc.include_base and not lc.bots:
            raise ConfigError(f"{origin}: train.league: an empty pool (pool_size 0, include_base false, no bots) has no "
                              "member to play or rate; raise pool_size, set include_base: true or add bots")
        if lc.share == 0 and lc.eval_every == 0:
            raise ConfigError(f"{origin}: train.league: share 0 and eval_every 0 neither play nor rate the pool; set "
                              "share > 0 (opponents in training) or eval_every > 0 (rated matches)")

    @classmethod
    def build(cls, plan: Any, parts: Any) -> League | None:
        from functools import partial

        cfg = plan.cfg
        if not cfg.train.league.enabled:  # past checkpoints as opponents, rated matches
            return None
        if plan.adapter_league:
            league = cls(cfg, parts.run_dir, parts.runner, partial(league_member_policy, cfg, parts.policies[cfg.trainable]),
                         together=True)
        else:
            league = cls(cfg, parts.run_dir, parts.runner, partial(league_policy, cfg))
        league.trained = parts.trained
        return league

    def after_step(self, ctx: StepContext) -> dict[str, float]:
        return self.results(ctx.step, ctx.episodes)

    def before_save(self, step: int) -> None:
        if step > 0:  # the checkpoint's weights join the pool (not the warm start's), each policy's in its own
            for unit in self.trained:
                self.add_member(step, unit.learner.module, unit.tokenizer, unit.name)

    def writer(self) -> Any:
        return self.save

    def after_save(self, run_dir: Path) -> None:
        from arena.loop.checkpoint import list_checkpoints

        self.prune(list_checkpoints(run_dir))

    def load(self, checkpoint: Path, step: int = 0) -> None:
        if (checkpoint / "league").is_dir():
            self.load_folder(checkpoint / "league")

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
        self.trainables: list[str] = list(cfg.trainables)
        self.several = len(self.trainables) > 1
        self.specs = {name: cfg.policies[name] for name in self.trainables}
        self.seat_rules = dict(cfg.seat_table())
        seats = runner.envs[0].possible_agents
        self.owner = {s: runner.seats.policy_for(s) for s in seats if runner.seats.policy_for(s) in self.specs}
        self.learner_seats = list(self.owner)  # every seat a trainable policy plays, in the game's order
        self.members: list[Member] = []
        for name in self.trainables:  # each trainable policy's base and the bots: fixed, never pruned
            tag = name if self.several else ""
            if self.lc.include_base:
                self.members.append(Member(self._named(name, BASE), self.specs[name].model, 0, tag))
            self.members += [Member(self._named(name, bot), bot, 0, tag) for bot in dict.fromkeys(self.lc.bots)]
        for bot in self.lc.bots:  # a typo fails here, before any game
            self.make_policy(bot, OPPONENT)
        self.stats: dict[str, tuple[float, float]] = {}  # member -> (learner's wins, games), ties count half
        self.ratings: list[dict[str, float]] = []
        self.loaded: dict[str, str] = {}  # trainable policy -> the member its opponent policy holds
        self.current: dict[str, Member] = {}  # this step's opponents, by the trainable policy they stand in for
        sampling = runner.sampling  # an opponent samples like the trainable policy it stands in for
        runner.sampling = lambda policy, phase: sampling(self.stands_for(policy) if is_opponent(policy) else policy, phase)

    # -------------------------------------------------------------- names
    def _named(self, policy: str, member: str) -> str:
        """A member's name: ``step_000004``, or ``p1/step_000004`` with several trainable policies."""
        return f"{policy}/{member}" if self.several else member

    def opponent(self, policy: str) -> str:
        """The policy name a past ``policy`` plays under: ``league``, or ``league/<policy>`` with several."""
        return f"{OPPONENT}/{policy}" if self.several else OPPONENT

    def stands_for(self, policy: str) -> str:
        """The trainable policy an opponent policy name (``league``, ``league/p1``, ``league/p1/step_4``) stands in for."""
        return policy.split("/")[1] if self.several else self.trainable

    def owner_of(self, member: Member) -> str:
        return member.policy or self.trainable

    def pool(self, policy: str) -> list[Member]:
        """``policy``'s members: its base, the bots and its own past checkpoints."""
        return [m for m in self.members if self.owner_of(m) == policy]

    # -------------------------------------------------------------- pool
    def pool_dir(self) -> Path:
        return self.run_dir / "league" / "pool"

    def add_member(self, step: int, model: Any, tokenizer: Any, policy: str | None = None) -> None:
        """``policy``'s current weights (the only trainable policy's by default) join the pool as
        ``step_NNNNNN`` (``<policy>/step_NNNNNN`` with several, in ``league/pool/<policy>/``); that
        policy's oldest checkpoint member leaves (with ``pool_size: 0`` nothing is written and nothing joins)."""
        if self.lc.pool_size == 0:
            return
        policy = policy or self.trainable
        folder = self.pool_dir() / policy if self.several else self.pool_dir()
        step_name = f"step_{step:06d}"
        name = self._named(policy, step_name)
        final = folder / step_name
        tmp = folder / f".tmp-{step_name}"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        joined = Member(name, final.relative_to(self.run_dir).as_posix(), step, policy if self.several else "")
        self.members = [m for m in self.members if m.name != name] + [joined]
        past = [m for m in self.pool(policy) if not is_base(m) and not is_bot(m)]
        for old in past[: max(0, len(past) - self.lc.pool_size)]:
            self.members.remove(old)
            self.stats.pop(old.name, None)

    def prune(self, checkpoints: Sequence[Path]) -> None:
        """Delete member folders that neither the pool nor any kept checkpoint names."""
        keep = {m.model for m in self.members}
        for ckpt in checkpoints:
            state = ckpt / "league" / "state.json"
            if state.is_file():
                keep |= {m["model"] for m in json.loads(state.read_text())["members"]}
        homes = [self.pool_dir() / p for p in self.trainables] if self.several else [self.pool_dir()]
        for home in homes:
            for folder in home.iterdir() if home.is_dir() else ():
                if folder.relative_to(self.run_dir).as_posix() not in keep:
                    shutil.rmtree(folder, ignore_errors=True)

    def activate(self, member: Member) -> str:
        """Load ``member`` as its opponent policy (``league``, or ``league/<policy>`` with several), dropping
        the one that policy held first: one member per trainable policy in memory. ``->`` that policy name."""
        policy = self.owner_of(member)
        name = self.opponent(policy)
        if self.loaded.get(policy) == member.name and name in self.runner.policies:
            return name
        self.runner.policies.pop(name, None)
        self.loaded.pop(policy, None)
        self.runner.policies[name] = self.member_policy(member, name)
        self.loaded[policy] = member.name
        return name

    def member_policy(self, member: Member, name: str) -> Any:
        """``member`` as a policy named ``name``: a bot, or its folder with its trainable policy's settings."""
        if is_bot(member):  # a scripted opponent: make_policy takes its "scripted:<bot>" name
            return self.make_policy(member.model, name)
        model = member.model if is_base(member) else str(self.run_dir / member.model)  # members live in the run
        spec = self.specs[self.owner_of(member)].model_copy(
            update={"model": model, "trainable": False, "frozen": True, "backend": "hf"})
        return self.make_policy(spec, name)

    # -------------------------------------------------------------- training games
    def seat_map(self, seats: Mapping[str, str]) -> Any:
        """The config's seat table with ``seats`` (seat -> policy) put first: a seat named there is played as
        named, even where the config names that seat itself (``player_1: p1``)."""
        from arena.runner import SeatMap

        return SeatMap(dict(seats) | {k: v for k, v in self.seat_rules.items() if k not in seats})

    def _rng(self, step: int, *salt: int) -> np.random.Generator:
        return np.random.default_rng([self.cfg.train.seed, step, *salt])

    def draw(self, step: int) -> dict[str, Member]:
        """The step's opponent of each trainable policy with members (one draw from its own pool); none when
        ``share`` is 0 or fewer than two seats are trainable."""
        if not self.members or self.lc.share == 0 or len(self.learner_seats) < 2:
            return {}
        draw = SAMPLERS[self.lc.sampler]
        if not self.several:
            return {self.trainable: draw(self.members, self.stats, self._rng(step, 0), self.lc.pfsp_power)}
        return {name: draw(self.pool(name), self.stats, self._rng(step, 0, i), self.lc.pfsp_power)
                for i, name in enumerate(self.trainables) if self.pool(name)}

    def opponent_count(self) -> int:
        k = len(self.learner_seats)
        return min(k - 1, max(1, round(self.lc.share * k))) if self.lc.share > 0 else 0

    def assign(self, step: int, specs: Sequence[Any]) -> list[Any]:
        """The step's games with past members in some trainable seats of each game: ``opponent_count()`` of
        all the trainable seats, drawn per game among the seats of policies that drew a member; each such
        seat is played by the member drawn from the pool of the policy that owns the seat."""
        from arena.runner import EpisodeSpec

        self.current = drawn = self.draw(step)
        if not drawn:
            return list(specs)
        names = {policy: self.activate(member) for policy, member in drawn.items()}
        seats = [s for s in self.learner_seats if self.owner[s] in drawn]
        count = min(self.opponent_count(), len(seats))
        rng = self._rng(step, 1)
        out = []
        for spec in specs:
            chosen = rng.choice(len(seats), size=count, replace=False)
            rules = {seats[int(k)]: names[self.owner[seats[int(k)]]] for k in sorted(chosen)}
            out.append(EpisodeSpec(seed=spec.seed, options=spec.options, seats=self.seat_map(rules)))
        return out

    def results(self, step: int, episodes: Sequence[Any]) -> dict[str, float]:
        """Results against this step's member, and a rated match every ``eval_every`` steps (``league/`` metrics)."""
        row = self._record(episodes)
        if self.lc.eval_every and step % self.lc.eval_every == 0:
            row |= self.rated_match(step)
        return row

    def _record(self, episodes: Sequence[Any]) -> dict[str, float]:
        """Each drawn member's results: the current policies' seats (any trainable policy) against its seats,
        pairwise by rank; metrics ``league/...``, or ``league/<policy>/...`` with several trainable policies."""
        row: dict[str, float] = {"league/pool_size": float(len(self.members))}
        for policy, member in self.current.items():
            name = self.opponent(policy)
            scores, opp_rewards, opp_turns = [], [], 0
            for ep in episodes:
                by_seat = {t.seat: t.policy for t in ep.turns}
                opp = [s for s, p in by_seat.items() if p == name]
                mine = [s for s, p in by_seat.items() if p in self.specs]
                opp_turns += sum(t.policy == name for t in ep.turns)
                opp_rewards += [ep.rewards.get(s, 0.0) for s in opp]
                pairs = [1.0 if ep.outcome[a].rank < ep.outcome[b].rank else 0.0 if ep.outcome[a].rank > ep.outcome[b].rank
                         else 0.5 for a in mine for b in opp if a in ep.outcome and b in ep.outcome]
                if pairs:
                    scores.append(float(np.mean(pairs)))
            wins, games = self.stats.get(member.name, (0.0, 0.0))
            self.stats[member.name] = (wins + sum(scores), games + len(scores))
            key = f"league/{policy}/" if self.several else "league/"
            row |= {f"{key}opponent_step": float(member.step), f"{key}opponent_turns": float(opp_turns),
                    f"{key}score_vs_opponent": float(np.mean(scores)) if scores else math.nan,
                    f"{key}opponent_reward": float(np.mean(opp_rewards)) if opp_rewards else math.nan}
        return row

    # -------------------------------------------------------------- rated matches
    def rated_match(self, step: int) -> dict[str, float]:
        """The current policy against every member on held-out seeds; its Bradley-Terry rating vs base."""
        from arena.runner import EpisodeSpec
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
            name = f"{OPPONENT}/{member.name}" if self.together else self.activate(member)
            if self.together:
                self.runner.policies[name] = self.member_policy(member, name)
            if self.several:  # the member in one seat of its own policy, the current policies in the others
                tables = self.own_seat_tables(member, layouts)
            else:
                tables = schedule(["current", member.name], self.learner_seats, rounds, seed=step, layouts=layouts)
            seeds = held_out_seeds(1000 + step * 64 + k, len(tables))
            batch += [(t, EpisodeSpec(seed=s, options=dict(t.options), seats=self.seat_map(
                {seat: self.owner[seat] if p == "current" else name for seat, p in t.seating.items()})))
                for t, s in zip(tables, seeds, strict=True)]
            if not self.together or k == len(self.members) - 1:  # one member at a time, or all of them at once
                for (t, _), ep in zip(batch, self.runner.play([spec for _, spec in batch]), strict=True):
                    games.append(game_from_outcome(dict(t.seating), ep.roles, ep.outcome))
                batch = []
        for member in self.members if self.together else ():
            self.runner.policies.pop(f"{OPPONENT}/{member.name}", None)
        anchor = next((m.name for m in self.members if is_base(m)), self.members[0].name)
        names = [m.name for m in self.members] + ["current"]
        fit = bradley_terry(games, names, anchor=anchor, rounds=self.lc.bootstrap, seed=step)
        entry = {"step": float(step), "rating": fit.rating["current"], "low": fit.low["current"],
                 "high": fit.high["current"], "games": float(len(games))}
        self.ratings.append(entry)
        return {"league/rating": entry["rating"], "league/rating_low": entry["low"], "league/rating_high": entry["high"],
                "league/rated_games": entry["games"]}

    def own_seat_tables(self, member: Member, layouts: Sequence[Mapping[str, Any]]) -> list[Any]:
        """``eval_games`` tables for a member of one of several trainable policies: it sits in one of its own
        policy's seats (cycled), the current policies in every other trainable seat; layouts cycled too."""
        from arena.stats.seating import Table

        own = [s for s in self.learner_seats if self.owner[s] == self.owner_of(member)]
        return [Table(index=j, round=j // len(own), options=dict(layouts[(j // len(own)) % len(layouts)]),
                      seating={s: member.name if s == own[j % len(own)] else "current" for s in self.learner_seats})
                for j in range(self.lc.eval_games)]

    # -------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        return {"members": [m.__dict__ for m in self.members], "stats": {k: list(v) for k, v in self.stats.items()},
                "ratings": self.ratings}

    def save(self, folder: Path) -> None:
        (folder / "state.json").write_text(json.dumps(self.state(), indent=2))

    def load_folder(self, folder: Path) -> None:
        data = json.loads((folder / "state.json").read_text())
        self.members = [Member(**m) for m in data["members"]]
        self.stats = {k: (float(v[0]), float(v[1])) for k, v in data["stats"].items()}
        self.ratings = list(data["ratings"])
        self.loaded = {}


def league_policy(cfg: Any, spec: Any, name: str) -> Any:
    """A league member's policy: a checkpoint's model spec, or a ``scripted:<bot>`` (``train.league.bots``)."""
    from arena.core.errors import ConfigError
    from arena.policies.config import ScriptedSpec, shorthand_policy
    from arena.policies.factory import ModelStore, make_model_policy, scripted_policy

    if isinstance(spec, str):
        bot = shorthand_policy(spec)
        if not isinstance(bot, ScriptedSpec):
            raise ConfigError(f"train.league.bots: {spec!r} is not a scripted opponent; write scripted:<bot>")
        return scripted_policy(cfg.game.cls, bot, name, field="train.league.bots")
    return make_model_policy(spec, name, ModelStore())


def league_member_policy(cfg: Any, trainable: Any, spec: Any, name: str) -> Any:
    """A league member's policy: a model member (an adapter checkpoint, or the base) served on the trainable
    policy's vLLM engine under its own adapter; a bot as :func:`league_policy` makes it. A member over
    another base is one line (``train.league``)."""
    from arena.core.errors import ConfigError
    from arena.policies.factory import engine_policy

    if isinstance(spec, str):
        return league_policy(cfg, spec, name)
    try:
        return engine_policy(spec, name, trainable.shared_engine)
    except ValueError as e:
        raise ConfigError(f"train.league: {e}; a league of adapters plays on the trainable policy's base") from None
