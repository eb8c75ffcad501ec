"""Skill-SP library evolution: induction and refinement driven by a (here scripted) frozen model."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from arena.core.game_types import TextGenerator
from arena.runner import Runner, generate_texts
from arena.games.skill_sp import SkillSpGame, SkillState
from arena.games.skill_sp.bots import BOTS
from arena.games.skill_sp.controller import EXPLORATION, SkillLibrary
from arena.games.skill_sp.env import shared_pool
from arena.games.skill_sp.evolve import EvolutionConfig, evolve, parse_package_text
from arena.games.skill_sp.loader import load_library
from arena.games.skill_sp.sandbox import Limits
from arena.games.skill_sp.types import SkillSpConfig
from arena.policies.scripted import ScriptedPolicy
from test_skill_sp_controller import NEW_SKILL, NEW_VALIDATORS  # same folder (pytest puts it on sys.path)

PACKAGE_REPLY = f"Here it is.\n<skill_md>\n{NEW_SKILL}</skill_md>\n<validators>\n```python\n{NEW_VALIDATORS}```\n</validators>"
SMALL = {"probes": 4, "solvers": 2}


def writer(text: str) -> TextGenerator:
    """A scripted policy's generation, bound as the loop binds a policy for a game state."""
    return partial(generate_texts, ScriptedPolicy(lambda obs, rng: text))


def exploration_episodes(n: int):
    runner = Runner(lambda: SkillSpGame(**SMALL, exploration_share=1.0), {"b": ScriptedPolicy(BOTS["default"])}, num_envs=4)
    return runner.play(list(range(n)))


def failing_episodes(skill: str, n: int):
    env = SkillSpGame(**SMALL)
    out = []
    for seed in range(n):
        env.reset(seed=seed, options={"skill": skill})
        env.step('{"task": "What is 2 + 2?", "contract": {"answer": 5, "calls": [{"tool": "calculate", "args": {"expression": "2 + 2"}}]}}')
        out.append(env.episode())
    return out


def test_parse_package_text():
    assert parse_package_text(PACKAGE_REPLY) == (NEW_SKILL, NEW_VALIDATORS.strip() + "\n")
    assert not isinstance(parse_package_text("<skill_md>x</skill_md>"), tuple)


def test_induction_admits_valid_novel_packages_only():
    pool = shared_pool(Limits(), 2)
    episodes = exploration_episodes(4)
    assert sum(ep.info["consistent"] for ep in episodes) >= 2
    lib = SkillLibrary(load_library().values())
    metrics = evolve(lib, episodes, writer(PACKAGE_REPLY), pool, EvolutionConfig(induce_per_step=2), seed=0)
    assert metrics["induced"] == 1 and metrics["induce_rejected"] == 1  # the second copy is not novel
    [(_, _, data)] = [e for e in lib.graph.edges(EXPLORATION, data=True)]
    best = max((ep for ep in episodes if ep.info["consistent"]), key=lambda ep: ep.rewards["proposer"])
    assert data["task"] in best.info["proposal"]
    junk = SkillLibrary(load_library().values())
    metrics = evolve(junk, episodes, writer("I would write a skill about numbers."), pool, EvolutionConfig(induce_per_step=2),
                     seed=0)
    assert metrics["induced"] == 0 and metrics["induce_rejected"] == 2 and junk == SkillLibrary(load_library().values())


def test_refinement_replaces_a_failing_skill():
    pool = shared_pool(Limits(), 2)
    episodes = failing_episodes("arithmetic", 2)
    assert all("not the answer" in ep.info["reason"] for ep in episodes)
    lib = SkillLibrary(load_library().values())
    reply = "The answers were wrong.\n<rules>\n- Compute the answer with the reference calls before writing it.\n</rules>"
    metrics = evolve(lib, episodes, writer(reply), pool, EvolutionConfig(induce_per_step=0), seed=0)
    assert metrics["refined"] == 1
    assert "arithmetic" not in lib.weights() and "arithmetic_v2" in lib.weights()
    assert lib.packages["arithmetic_v2"].rules.startswith("- Compute the answer")
    assert lib.graph.has_edge("arithmetic", "arithmetic_v2", key="refined_from")
    broken = SkillLibrary(load_library().values())
    metrics = evolve(broken, episodes, writer("<rules>\n## Examples\n</rules>"), pool, EvolutionConfig(), seed=0)
    assert metrics["refine_rejected"] == 1 and "arithmetic" in broken.weights()


def test_state_update_evolves_with_the_named_policy():
    config = SkillSpConfig(**SMALL, exploration_share=1.0, evolution=EvolutionConfig(policy="base", induce_per_step=1))
    state = SkillState(config)
    metrics = state.update(exploration_episodes(4), {"base": writer(PACKAGE_REPLY)})
    assert metrics["induced"] == 1 and metrics["library_size"] == 13
    assert "roman_numerals" in state.snapshot().names
    routed = SkillSpGame(config)
    routed.bind_state(state.snapshot())
    routed.reset(seed=0, options={"skill": "roman_numerals"})
    assert routed.observe("proposer").rules.startswith("- Ask for the integer value")
    with pytest.raises(ValueError, match="evolution.policy"):
        state.update([], {"other": writer("")})
    assert np.isfinite(list(state.library.weights().values())).all()
