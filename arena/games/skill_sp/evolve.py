"""Library evolution between iterations with the frozen base model: induce and refine (PROTOCOLS.md §3, step 6).

* **Induce.** The step's valid exploration tasks, best proposer reward first (at most
  ``induce_per_step``), are shown to the frozen model, which writes a whole package
  between ``<skill_md>...</skill_md>`` and ``<validators>...</validators>``. It enters
  the library only through :meth:`SkillLibrary.induce`: structurally valid, its own
  examples accepted by its validators in the sandbox, and lexically novel.
* **Refine.** A skill whose tasks all failed validation this step (at least
  ``refine_min_failures`` of them) is shown to the model with the failure reasons the
  sandbox and the probes recorded (the diagnosis); the model rewrites the rules between
  ``<rules>...</rules>``. The new version ``<name>_v<k>`` replaces the old one only if
  the package stays structurally valid and its examples still pass in the sandbox.

One batched generate call per kind per step; any text the model writes is parsed,
counted and at worst rejected, never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.core.game_types import Invalid, TextGenerator
from arena.core.types import ChatMessage, Episode
from arena.games.skill_sp.controller import SkillLibrary
from arena.games.skill_sp.loader import SkillPackage, examples_jobs, parse_skill
from arena.games.skill_sp.sandbox import SandboxPool, Status

FORMAT_MD = """---
name: <lowercase_slug>
description: <one line>
kind: tool_use            # or logic
tools: [<tool names>]     # tool_use only
routing: {domain: <area>, tags: [<keywords>], difficulty: easy}
---
## Rules
- <how to write a task of this kind>
## Generation hints
- <how to vary it>
## Examples
### Example 1
Task: <a task>

```json
<its contract>
```"""


class EvolutionConfig(BaseModel):
    """Which policy evolves the library and how much per step."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    policy: str | None = Field(default=None, description="Policy (a frozen base model) that writes packages; None: no evolution.")
    induce_per_step: int = Field(
        default=20, ge=0, le=64,
        description="Exploration tasks turned into candidate skills per step (one step = one iteration; paper: about 20).",
    )
    refine_min_failures: int = Field(default=2, ge=1, description="Failed tasks in a step before a skill is refined.")
    temperature: float = Field(default=0.7, ge=0.0, description="Sampling temperature of the evolving model.")
    max_new_tokens: int = Field(default=512, ge=16, description="Token budget of one written package or rule set.")


def _between(text: str, tag: str) -> str | None:
    m = re.search(rf"<{tag}>\s*\n?(.*?)</{tag}>", text, flags=re.S)
    return m.group(1) if m else None


def parse_package_text(text: str) -> tuple[str, str] | Invalid:
    """``(SKILL.md, validators.py)`` from a model's reply, or Invalid."""
    md, validators = _between(text, "skill_md"), _between(text, "validators")
    if md is None or validators is None:
        return Invalid(reason="reply lacks <skill_md>...</skill_md> or <validators>...</validators>")
    return md.strip() + "\n", validators.strip().removeprefix("```python").removesuffix("```").strip() + "\n"


def induce_messages(task: str, contract: Mapping[str, Any]) -> list[ChatMessage]:
    return [
        {"role": "system", "content": "You turn a good task into a reusable skill package for a task generator."},
        {"role": "user", "content": (
            f"Task: {task}\nContract: {json.dumps(contract)}\n\nWrite a skill that generates tasks like this one. "
            f"Reply with <skill_md>\n{FORMAT_MD}\n</skill_md> and <validators>\nPython (standard library, plus "
            "`import tools` for tool-use skills) defining validate(contract) -> list of problems (empty if the "
            "contract is right) and check(contract, response) -> bool\n</validators>."
        )},
    ]  # fmt: skip


def refine_messages(pkg: SkillPackage, failures: Sequence[str]) -> list[ChatMessage]:
    reasons = "\n".join(f"- {r}" for r in failures[:8])
    return [
        {"role": "system", "content": "You improve the rules of a task-generation skill."},
        {"role": "user", "content": (
            f"Skill {pkg.name}: {pkg.description}\nCurrent rules:\n{pkg.rules}\n\nTasks written with these rules "
            f"failed validation:\n{reasons}\n\nDiagnose the failures and reply with improved rules as a Markdown "
            "bullet list between <rules> and </rules>."
        )},
    ]  # fmt: skip


def _examples_pass(pkg: SkillPackage, pool: SandboxPool) -> bool:
    return all(r.status is Status.OK and r.value == [] for r in pool.map(examples_jobs(pkg)))


def _generate(generate: TextGenerator, messages: list[list[ChatMessage]], cfg: EvolutionConfig, seed: int) -> list[str]:
    return generate(messages, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=seed, seat="evolve")


def evolve(
    library: SkillLibrary, episodes: Sequence[Episode], generate: TextGenerator, pool: SandboxPool, cfg: EvolutionConfig,
    seed: int,
) -> dict[str, float]:
    """Induce from the step's best exploration tasks and refine failing skills; return counts."""
    metrics = {"induced": 0.0, "induce_rejected": 0.0, "refined": 0.0, "refine_rejected": 0.0}
    explore = [ep for ep in episodes if ep.info.get("stream") == "exploration" and ep.info.get("consistent")]
    explore.sort(key=lambda ep: -ep.rewards.get("proposer", 0.0))
    sources = []
    for ep in explore[: cfg.induce_per_step]:
        proposal = json.loads(str(ep.info.get("proposal") or "{}"))
        if proposal:
            sources.append((proposal["task"], proposal["contract"]))
    if sources:
        replies = _generate(generate, [induce_messages(t, c) for t, c in sources], cfg, seed)
        for (task, _), reply in zip(sources, replies, strict=True):
            parsed = parse_package_text(reply)
            result = parsed if isinstance(parsed, Invalid) else library.induce(*parsed, source_task=task, pool=pool)
            metrics["induced" if isinstance(result, SkillPackage) else "induce_rejected"] += 1

    failures: dict[str, list[str]] = {}
    for ep in episodes:
        skill = ep.info.get("skill")
        if isinstance(skill, str):
            failures.setdefault(skill, [])
            if not ep.info.get("consistent"):
                failures[skill].append(str(ep.info.get("reason") or "unparsed proposal"))
    routed = {s: ep_count for s, ep_count in ((s, sum(e.info.get("skill") == s for e in episodes)) for s in failures)}
    to_refine = [s for s, r in failures.items() if len(r) >= cfg.refine_min_failures and len(r) == routed[s]
                 and s in library.active()]  # fmt: skip
    if to_refine:
        replies = _generate(generate, [refine_messages(library.packages[s], failures[s]) for s in to_refine], cfg, seed + 1000)
        for name, reply in zip(to_refine, replies, strict=True):
            rules = _between(reply, "rules")
            new = _refined(library, name, rules.strip() if rules else "")
            ok = not isinstance(new, Invalid) and _examples_pass(new, pool)
            if ok and not isinstance(library.refine(name, new), Invalid):  # type: ignore[arg-type]
                metrics["refined"] += 1
            else:
                metrics["refine_rejected"] += 1
    return metrics


def _refined(library: SkillLibrary, name: str, rules: str) -> SkillPackage | Invalid:
    if not rules:
        return Invalid(reason="no <rules> in the reply")
    base, k = re.sub(r"_v\d+$", "", name), 2
    while f"{base}_v{k}" in library.packages:
        k += 1
    old = library.packages[name]
    draft = old.model_copy(update={"name": f"{base}_v{k}", "rules": rules})
    return parse_skill(draft.skill_md(), draft.validators)  # re-parsed: the rewrite must keep the package valid
