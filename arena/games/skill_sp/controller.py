"""The skill controller: statistics, routing, pruning, induction, and the library as a graph.

Formulas (PROTOCOLS.md §3, "Routing" and "Iteration"):

* **Beta-smoothed rates.** For each of the three outcomes of a skill's tasks,
  ``s_i = (k_i + a) / (n + a + b)`` with ``n`` tasks routed to the skill, ``k_i``
  of them with the outcome, and a Beta(a, b) prior (default a = b = 1):
  ``s1`` structurally verified (schema and the skill's validators accept the
  contract), ``s2`` solver-consistent (the probes' unique majority equals the
  contract's answer), ``s3`` frontier difficulty (``v_solve`` in
  ``[band_low, band_high]``). ``s3`` counts VALID tasks only (parsed, verified and
  solver-consistent) in the band, over all ``n`` tasks: an invalid task's
  ``v_solve`` is measured against a contract the probes' majority contradicts, so
  it says nothing about difficulty, and the proposer reward, whose band it tracks,
  is 0 for it (``1[valid] * ...``). The paper names the outcome without saying
  this; it is our reading (issue #24). Example: two tasks with ``v_solve`` 0.5,
  one valid: ``s3 = (1 + a) / (2 + a + b)`` = 0.5, not 0.75.
* **Quality** ``v = 0.5 s1 + 0.25 s2 + 0.25 s3``.
* **Routing weight** ``w = clip(v, clip_low, 1) * b * exp(-uses / tau)``: the
  quality, kept above ``clip_low`` so every active skill stays routable, times an
  exploration bonus that decays with the skill's uses. Routing samples skills
  with probability ``w / sum(w)``; only the ratios matter, so a skill used less
  than the others gains share. Pruned and retired skills have no weight.
* **Proposer reward** ``1[valid] * (1 - 2 |v_solve - 0.5|)``, and ``-1`` when the
  proposer's output does not parse. It peaks for tasks solved half the time.
* **Expected frontier reward** of a skill: the Beta-smoothed mean of the
  proposer rewards of its tasks, ``(R + a) / (n + a + b)`` with ``R`` the sum of
  rewards clipped to ``[0, 1]`` (a fractional-success Beta update).
  **Pruning** drops a skill once ``n >= prune_min_tasks`` and this falls below
  ``prune_threshold``.
* **Coverage**: the number of distinct task shapes (:func:`task_shape`, the
  contract's nested key structure) a skill has produced.
* **Induction** keeps a model-written package only if it parses and passes the
  structural checks (``loader.parse_skill``), optionally its own examples pass its
  validators in the sandbox, its name is new, and it is lexically novel: the
  Jaccard similarity of its word set (description, tags, rules) with every
  library skill is below ``novelty_max_jaccard``.

**The library is a networkx graph** (this goes beyond the paper, which keeps a flat
set): a ``MultiDiGraph`` whose nodes are skills (attributes: status ``active`` |
``pruned`` | ``retired``, origin ``seed`` | ``induced`` | ``refined``, the
iteration it appeared in) plus one node ``exploration`` (the skill-free stream).
Edges keyed ``induced_from`` (exploration -> induced skill, with the source
task), ``refined_from`` (old version -> new version) and ``co_occurs`` (two
skills routed in the same step, with a count, stored once from the smaller
name). It is saved as readable skill folders plus ``graph.json`` (node-link
data) and ``stats.json``, and restored exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from arena.core.game_types import Invalid
from arena.games.skill_sp.loader import SkillPackage, examples_jobs, load_skill, parse_skill, save_skill
from arena.games.skill_sp.sandbox import SandboxPool, Status

EXPLORATION = "exploration"


class ControllerConfig(BaseModel):
    """Routing, pruning and induction settings of the skill controller."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prior_a: float = Field(default=1.0, gt=0, description="Beta prior pseudo-successes a of every rate.")
    prior_b: float = Field(default=1.0, gt=0, description="Beta prior pseudo-failures b of every rate.")
    band_low: float = Field(
        default=0.2, ge=0, le=1, description="Lowest v_solve that counts as frontier difficulty (valid tasks only)."
    )
    band_high: float = Field(default=0.8, ge=0, le=1, description="Highest v_solve that counts as frontier difficulty.")
    clip_low: float = Field(default=0.05, gt=0, le=1, description="Quality floor in the routing weight (keeps w > 0).")
    bonus: float = Field(default=1.0, gt=0, description="Scale b of the exploration bonus b*exp(-uses/tau).")
    tau: float = Field(default=50.0, gt=0, description="Decay tau (in uses) of the exploration bonus.")
    prune_threshold: float = Field(default=0.15, ge=0, le=1, description="Prune below this expected frontier reward.")
    prune_min_tasks: int = Field(default=8, ge=1, description="Tasks a skill must have had before it can be pruned.")
    novelty_max_jaccard: float = Field(
        default=0.6, gt=0, le=1, description="An induced skill this similar (word Jaccard) to a library skill is a duplicate."
    )


# ------------------------------------------------------------------ pure formulas
def beta_rate(k: float, n: float, a: float = 1.0, b: float = 1.0) -> float:
    """``(k + a) / (n + a + b)``: the posterior mean rate under a Beta(a, b) prior."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    return (k + a) / (n + a + b)


def quality(s1: float, s2: float, s3: float) -> float:
    """``v = 0.5 s1 + 0.25 s2 + 0.25 s3``."""
    return 0.5 * s1 + 0.25 * s2 + 0.25 * s3


def exploration_bonus(uses: int, bonus: float, tau: float) -> float:
    """``b * exp(-uses / tau)``."""
    return bonus * math.exp(-uses / tau)


def routing_weight(v: float, uses: int, cfg: ControllerConfig) -> float:
    """``clip(v, clip_low, 1) * b * exp(-uses / tau)``; positive for every finite ``uses``."""
    return min(max(v, cfg.clip_low), 1.0) * exploration_bonus(uses, cfg.bonus, cfg.tau)


def proposer_reward(parsed: bool, valid: bool, v_solve: float) -> float:
    """``-1`` if the proposal did not parse, else ``1[valid] * (1 - 2 |v_solve - 0.5|)``."""
    if not 0.0 <= v_solve <= 1.0:
        raise ValueError(f"v_solve is a rate in [0, 1], got {v_solve}")
    if not parsed:
        return -1.0
    return (1.0 - 2.0 * abs(v_solve - 0.5)) if valid else 0.0


def task_shape(contract: Any) -> str:
    """A short hash of the contract's structure (keys and value types, not values): what coverage counts."""

    def shape(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: shape(v) for k, v in sorted(x.items())}
        if isinstance(x, list):
            return [shape(x[0])] if x else []
        return type(x).__name__

    return hashlib.sha1(json.dumps(shape(contract), sort_keys=True).encode()).hexdigest()[:12]


def _words(pkg: SkillPackage) -> set[str]:
    text = " ".join([pkg.description, " ".join(pkg.routing.tags), pkg.rules]).lower()
    return set(re.findall(r"[a-z][a-z0-9]+", text))


def jaccard(a: set[str], b: set[str]) -> float:
    """``|a & b| / |a | b|`` (0 for two empty sets)."""
    return len(a & b) / len(a | b) if a | b else 0.0


# ------------------------------------------------------------------ statistics
@dataclass(frozen=True)
class Outcome:
    """What one task routed to a skill ended as."""

    parsed: bool
    structurally_verified: bool
    solver_consistent: bool
    v_solve: float
    shape: str = ""

    @property
    def valid(self) -> bool:
        return self.parsed and self.structurally_verified and self.solver_consistent


@dataclass(frozen=True)
class SkillStats:
    """Counts behind a skill's rates; ``shapes`` is sorted so equal stats compare and save equal."""

    n: int = 0
    verified: int = 0
    consistent: int = 0
    frontier: int = 0
    reward_sum: float = 0.0
    uses: int = 0
    shapes: tuple[str, ...] = ()

    def record(self, o: Outcome, cfg: ControllerConfig) -> SkillStats:
        """The stats after one more task (pure)."""
        frontier = o.valid and cfg.band_low <= o.v_solve <= cfg.band_high
        r = proposer_reward(o.parsed, o.valid, o.v_solve)
        return replace(
            self,
            n=self.n + 1,
            verified=self.verified + (o.parsed and o.structurally_verified),
            consistent=self.consistent + (o.parsed and o.solver_consistent),
            frontier=self.frontier + frontier,
            reward_sum=self.reward_sum + min(max(r, 0.0), 1.0),
            uses=self.uses + 1,
            shapes=tuple(sorted(set(self.shapes) | ({o.shape} if o.shape else set()))),
        )

    def rates(self, cfg: ControllerConfig) -> tuple[float, float, float]:
        a, b = cfg.prior_a, cfg.prior_b
        return beta_rate(self.verified, self.n, a, b), beta_rate(self.consistent, self.n, a, b), beta_rate(
            self.frontier, self.n, a, b
        )

    def quality(self, cfg: ControllerConfig) -> float:
        return quality(*self.rates(cfg))

    def expected_frontier_reward(self, cfg: ControllerConfig) -> float:
        return beta_rate(self.reward_sum, self.n, cfg.prior_a, cfg.prior_b)

    @property
    def coverage(self) -> int:
        return len(self.shapes)


def should_prune(stats: SkillStats, cfg: ControllerConfig) -> bool:
    """Enough evidence and an expected frontier reward below the threshold."""
    return stats.n >= cfg.prune_min_tasks and stats.expected_frontier_reward(cfg) < cfg.prune_threshold


# ------------------------------------------------------------------ the library
class SkillLibrary:
    """Packages, their statistics and the lineage / co-occurrence graph; one object per run."""

    def __init__(self, packages: Iterable[SkillPackage] = (), config: ControllerConfig | None = None) -> None:
        self.config = config or ControllerConfig()
        self.packages: dict[str, SkillPackage] = {}
        self.stats: dict[str, SkillStats] = {}
        self.graph = nx.MultiDiGraph()
        self.graph.add_node(EXPLORATION, status="stream", origin="stream", iteration=0)
        self.iteration = 0
        for pkg in packages:
            self._add(pkg, origin="seed")

    def _add(self, pkg: SkillPackage, origin: str, stats: SkillStats | None = None) -> None:
        self.packages[pkg.name] = pkg
        self.stats[pkg.name] = stats or SkillStats()
        self.graph.add_node(pkg.name, status="active", origin=origin, iteration=self.iteration)

    # -------------------------------------------------------------- routing
    def active(self) -> list[str]:
        return sorted(n for n in self.packages if self.graph.nodes[n]["status"] == "active")

    def weights(self) -> dict[str, float]:
        """Routing weight of every active skill (pruned and retired skills have none)."""
        cfg = self.config
        return {n: routing_weight(self.stats[n].quality(cfg), self.stats[n].uses, cfg) for n in self.active()}

    def route(self, rng: np.random.Generator, k: int) -> list[str]:
        """``k`` skills sampled with probability proportional to their weights (with replacement)."""
        weights = self.weights()
        if not weights or k <= 0:
            return []
        names = list(weights)
        p = np.array([weights[n] for n in names])
        return [names[i] for i in rng.choice(len(names), size=k, p=p / p.sum())]

    # -------------------------------------------------------------- evolution
    def record(self, name: str, outcome: Outcome) -> None:
        """Fold one routed task's outcome into the skill's statistics."""
        self.stats[name] = self.stats[name].record(outcome, self.config)

    def co_occur(self, names: Iterable[str]) -> None:
        """Count each pair of distinct skills routed in the same step."""
        unique = sorted(set(names))
        for i, a in enumerate(unique):
            for b in unique[i + 1 :]:
                if self.graph.has_edge(a, b, key="co_occurs"):
                    self.graph.edges[a, b, "co_occurs"]["count"] += 1
                else:
                    self.graph.add_edge(a, b, key="co_occurs", count=1)

    def prune(self) -> list[str]:
        """Mark every active skill that :func:`should_prune` as pruned; return their names."""
        dropped = [n for n in self.active() if should_prune(self.stats[n], self.config)]
        for n in dropped:
            self.graph.nodes[n]["status"] = "pruned"
        return dropped

    def novelty_problem(self, pkg: SkillPackage) -> str | None:
        if pkg.name in self.packages or pkg.name == EXPLORATION:
            return f"name {pkg.name!r} is taken"
        words = _words(pkg)
        for name, other in self.packages.items():
            sim = jaccard(words, _words(other))
            if sim >= self.config.novelty_max_jaccard:
                return f"too similar to {name!r} (Jaccard {sim:.2f})"
        return None

    def induce(
        self, skill_md: str, validators: str, source_task: str = "", pool: SandboxPool | None = None
    ) -> SkillPackage | Invalid:
        """Admit a model-written package if it is structurally valid, (with ``pool``) passes its own
        examples in the sandbox, and is lexically novel; else Invalid(reason) and the library is unchanged."""
        pkg = parse_skill(skill_md, validators)
        if isinstance(pkg, Invalid):
            return pkg
        problem = self.novelty_problem(pkg)
        if problem is not None:
            return Invalid(reason=problem)
        if pool is not None:
            for r in pool.map(examples_jobs(pkg)):
                if r.status is not Status.OK or r.value != []:
                    return Invalid(reason=f"an example fails its validators: {r.reason or r.value}"[:300])
        self._add(pkg, origin="induced")
        self.graph.add_edge(EXPLORATION, pkg.name, key="induced_from", task=source_task[:2000])
        return pkg

    def refine(self, name: str, new: SkillPackage) -> SkillPackage | Invalid:
        """Replace an active skill by a rewritten version: the old node is retired, stats carry over."""
        if name not in self.packages or self.graph.nodes[name]["status"] != "active":
            return Invalid(reason=f"no active skill {name!r}")
        if new.name in self.packages:
            return Invalid(reason=f"name {new.name!r} is taken")
        self._add(new, origin="refined", stats=self.stats[name])
        self.graph.nodes[name]["status"] = "retired"
        self.graph.add_edge(name, new.name, key="refined_from")
        return new

    def next_iteration(self) -> None:
        self.iteration += 1

    # -------------------------------------------------------------- reports
    def report(self) -> dict[str, dict[str, float]]:
        """Per active skill: weight, quality, rates, expected frontier reward, coverage, uses."""
        cfg, weights = self.config, self.weights()
        out = {}
        for n in self.active():
            st = self.stats[n]
            s1, s2, s3 = st.rates(cfg)
            out[n] = {"weight": weights[n], "quality": st.quality(cfg), "s_verified": s1, "s_consistent": s2,
                      "s_frontier": s3, "frontier_reward": st.expected_frontier_reward(cfg),
                      "coverage": st.coverage, "uses": st.uses}  # fmt: skip
        return out

    # -------------------------------------------------------------- persistence
    def save(self, folder: Path) -> None:
        """Readable files: ``skills/<name>/`` for every package ever admitted, ``graph.json``, ``stats.json``."""
        folder.mkdir(parents=True, exist_ok=True)
        for pkg in self.packages.values():
            save_skill(pkg, folder / "skills")
        graph = nx.node_link_data(self.graph, edges="links")
        (folder / "graph.json").write_text(json.dumps(graph, indent=1, sort_keys=True))
        stats = {n: asdict(s) for n, s in sorted(self.stats.items())}
        meta = {"iteration": self.iteration, "config": self.config.model_dump(), "stats": stats}
        (folder / "stats.json").write_text(json.dumps(meta, indent=1, sort_keys=True))

    @classmethod
    def load(cls, folder: Path) -> SkillLibrary:
        """Exactly what :meth:`save` wrote (a broken file is an error naming it)."""
        meta = json.loads((folder / "stats.json").read_text())
        lib = cls(config=ControllerConfig.model_validate(meta["config"]))
        lib.iteration = meta["iteration"]
        for name, raw in meta["stats"].items():
            pkg = load_skill(folder / "skills" / name)
            if isinstance(pkg, Invalid):
                raise ValueError(f"{folder / 'skills' / name}: {pkg.reason}")
            lib.packages[name] = pkg
            lib.stats[name] = SkillStats(**{**raw, "shapes": tuple(raw["shapes"])})
        data = json.loads((folder / "graph.json").read_text())
        lib.graph = nx.node_link_graph(data, directed=True, multigraph=True, edges="links")
        return lib

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SkillLibrary)
            and self.config == other.config
            and self.iteration == other.iteration
            and self.packages == other.packages
            and self.stats == other.stats
            and _graph_key(self.graph) == _graph_key(other.graph)
        )

    __hash__ = None  # type: ignore[assignment]


def _graph_key(g: nx.MultiDiGraph) -> tuple[Any, ...]:
    nodes = sorted((n, json.dumps(d, sort_keys=True)) for n, d in g.nodes(data=True))
    edges = sorted((u, v, k, json.dumps(d, sort_keys=True)) for u, v, k, d in g.edges(keys=True, data=True))
    return tuple(nodes), tuple(edges)


def weights_table(library: SkillLibrary) -> Mapping[str, float]:
    """Routing weights normalised to probabilities (for reports and plots)."""
    w = library.weights()
    total = sum(w.values()) or 1.0
    return {n: x / total for n, x in w.items()}
