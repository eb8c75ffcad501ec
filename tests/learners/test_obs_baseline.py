"""Baselines per observation (``obs_baseline``, arena/learners/advantages.py ``observation_advantages``): hand
values, a slow reference loop over several steps, the group fallback for observations not seen before, the
checkpointed state (JSON) resuming exactly, what it changes on a card game (each card measured against its
own value), and the start-up refusals: a game that does not declare ``observations_recur``, and trajectory
credit counted per attempt."""

from __future__ import annotations

import json
import random

import pytest
import torch
from pydantic import ValidationError

from arena.core.errors import ConfigError
from arena.core.types import Episode, Turn, observation_key
from arena.learners.advantages import group_index, observation_advantages
from arena.learners.checks import check_game
from arena.learners.config import LearnerConfig
from arena.learners.estimators import EstimatorStates
from arena.learners.samples import build_samples
from tolerance import approx64


def test_observation_advantages_by_hand() -> None:
    rewards = torch.tensor([1.0, 0.0, -1.0, 2.0, 1.0], dtype=torch.float64)
    obs = ["a", "b", "a", "c", "b"]
    groups = torch.tensor([0, 0, 0, 1, 1])
    adv, known, new = observation_advantages(rewards, obs, groups, {"a": 0.5, "z": 3.0}, alpha=0.9, limit=10)
    # a: 1 - 0.5, -1 - 0.5 (its baseline before the step); b, c: first sight, minus the group's mean (0 and 1.5)
    assert adv.tolist() == approx64([0.5, 0.0, -1.5, 0.5, -0.5])
    assert known.tolist() == [True, False, True, False, False]
    # z untouched and now the oldest; a: 0.9 x 0.5 + 0.1 x mean(1, -1); b: mean(0, 1); c: 2
    assert list(new) == ["z", "a", "b", "c"]
    assert list(new.values()) == approx64([3.0, 0.45, 0.5, 2.0])
    _, _, capped = observation_advantages(rewards, obs, groups, {"a": 0.5, "z": 3.0}, alpha=0.9, limit=3)
    assert list(capped) == ["a", "b", "c"]  # the least recently moved (z) is forgotten


def slow_reference(steps: list[tuple[list[float], list[str], list[int]]], alpha: float) -> list[list[float]]:
    """Each step's advantages, one turn at a time: ``r - b[o]`` with the baselines as the step found them, else
    ``r - mean(r_j : g_j == g_i)``; then each observation's baseline moves to the EMA with its step mean."""
    baselines: dict[str, float] = {}
    out = []
    for rewards, obs, groups in steps:
        step = []
        for i, r in enumerate(rewards):
            if obs[i] in baselines:
                step.append(r - baselines[obs[i]])
            else:
                same = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i]]
                step.append(r - sum(same) / len(same))
        out.append(step)
        for o in set(obs):
            mine = [rewards[i] for i in range(len(rewards)) if obs[i] == o]
            mean = sum(mine) / len(mine)
            baselines[o] = alpha * baselines[o] + (1 - alpha) * mean if o in baselines else mean
    return out


def test_observation_advantages_match_a_slow_loop_over_steps() -> None:
    rng = random.Random(0)
    steps = []
    for _ in range(6):
        n = rng.randint(3, 12)
        steps.append(([rng.uniform(-2, 2) for _ in range(n)], [rng.choice("abcdefg") for _ in range(n)],
                      [rng.randint(0, 2) for _ in range(n)]))
    want = slow_reference(steps, 0.8)
    state: dict[str, float] = {}
    for (rewards, obs, groups), expected in zip(steps, want, strict=True):
        adv, _, state = observation_advantages(torch.tensor(rewards, dtype=torch.float64), obs, torch.tensor(groups),
                                               state, alpha=0.8)
        assert adv.tolist() == approx64(expected, scale=4.0)


def card_turns(step: int) -> list[Turn]:
    """A card game's turns of one step: holding K, bet wins 2 and pass 0; holding J, bet loses 2 and pass 0.
    Each card's prompt names it (the observation); both seats are one role."""
    turns = []
    for card, bet in (("K", 2.0), ("J", -2.0)):
        for action, reward in (("bet", bet), ("pass", 0.0)):
            turns.append(Turn(index=len(turns), seat="player_0", role="player", phase="move", completion=action,
                              messages=[{"role": "user", "content": f"Your card: {card}. Bet or pass?"}],
                              reward=reward, group={"episode": f"s{step}", "phase": "move", "role": "player"},
                              policy="learner", prompt_ids=[1, 2], completion_ids=[3]))
    return turns


def push_per_card(name: str, steps: int = 40, **est: object) -> dict[str, float]:
    """The summed advantage at each card after ``steps`` steps: what an update pushes that card's choice by."""
    cfg = LearnerConfig(estimators={"move": {"name": name, "group_by": ["phase", "role"], **est}}, drop_zero_variance=False)
    states = EstimatorStates(cfg.estimators)
    for step in range(steps):
        turns = card_turns(step)
        samples, _ = build_samples([Episode(episode_id=f"s{step}", game="cards", turns=turns)], ["move"], cfg, states, "learner")
    return {card: sum(s.advantage for s, t in zip(samples, turns, strict=True) if card in t.messages[0]["content"])
            for card in "KJ"}


def test_each_card_is_measured_against_its_own_value() -> None:
    """With one baseline for the role (RAE) the King's bet and pass are pushed up together (+2 in sum) and the
    Jack's down (-2): every card moves alike within it, the push the measured card-blindness comes from. With a
    baseline per observation each card's advantages sum to 0 once the baselines have learnt the cards' values
    (1 and -1): only the actions' relative values push."""
    role = push_per_card("rae")
    assert role["K"] == approx64(2.0, scale=4.0) and role["J"] == approx64(-2.0, scale=4.0)
    own = push_per_card("obs_baseline", options={"alpha": 0.5})
    assert own["K"] == approx64(0.0, scale=4.0) and own["J"] == approx64(0.0, scale=4.0)


def test_the_state_is_json_and_a_resumed_run_gets_the_same_advantages() -> None:
    cfg = LearnerConfig(estimators={"move": {"name": "obs_baseline", "group_by": ["phase"], "options": {"alpha": 0.7}}})
    straight, cut = EstimatorStates(cfg.estimators), EstimatorStates(cfg.estimators)
    eps = [[Episode(episode_id=f"s{s}", game="cards", turns=card_turns(s)[s % 2:])] for s in range(4)]
    want = [[x.advantage for x in build_samples(ep, ["move"], cfg, straight, "learner")[0]] for ep in eps]
    got = [[x.advantage for x in build_samples(ep, ["move"], cfg, cut, "learner")[0]] for ep in eps[:2]]
    resumed = EstimatorStates(cfg.estimators)
    resumed.load_state_dict(json.loads(json.dumps(cut.state_dict())))
    got += [[x.advantage for x in build_samples(ep, ["move"], cfg, resumed, "learner")[0]] for ep in eps[2:]]
    assert got == want
    assert resumed.metrics() == {"obs_baseline/observations": 2.0}
    fresh = EstimatorStates(cfg.estimators)  # a resume without the state gets other advantages: the check can fail
    assert [[x.advantage for x in build_samples(ep, ["move"], cfg, fresh, "learner")[0]] for ep in eps[2:]] != want[2:]


def test_the_game_may_name_the_observation() -> None:
    turn = card_turns(0)[0]
    assert observation_key(turn) == observation_key(card_turns(5)[0])  # the same prompt in another episode
    assert observation_key(turn) != observation_key(card_turns(0)[2])  # another card
    assert observation_key(turn).startswith("prompt:")
    named = turn.model_copy(update={"group": {**turn.group, "observation": "K|"}})
    assert observation_key(named) == "K|"


def test_a_game_whose_observations_do_not_recur_is_refused() -> None:
    class Recurring:
        metadata = {"name": "poker_v0"}
        observations_recur = True

    class Unique:
        metadata = {"name": "essay_v0"}
        observations_recur = False

    class Undeclared:  # not an arena game at all: nothing declared is nothing granted
        pass

    per_obs = LearnerConfig(estimators={"move": {"name": "obs_baseline"}})
    check_game(Recurring, per_obs)
    with pytest.raises(ConfigError, match="Undeclared does not declare observations_recur"):
        check_game(Undeclared, per_obs)
    check_game(Unique, LearnerConfig(estimators={"move": {"name": "grpo"}}))
    with pytest.raises(ConfigError) as err:
        check_game(Unique(), per_obs)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("learner.estimators.move: obs_baseline") and "essay_v0" in msg
    assert "observations_recur" in msg


def test_the_declared_games() -> None:
    from arena.games.openspiel.env import OpenSpielGame
    from arena.games.spy.env import SpyGame

    per_obs = LearnerConfig(estimators={"move": {"name": "obs_baseline"}})
    check_game(OpenSpielGame, per_obs)
    with pytest.raises(ConfigError, match="spy"):
        check_game(SpyGame, per_obs)


def test_trajectory_credit_is_counted_per_turn() -> None:
    with pytest.raises(ValidationError, match="trajectory_stats: turn"):
        LearnerConfig(estimators={"move": {"name": "obs_baseline", "credit": "trajectory"}})
    LearnerConfig(estimators={"move": {"name": "obs_baseline", "credit": "trajectory", "trajectory_stats": "turn"}})


def test_a_fallback_group_without_variance_is_dropped() -> None:
    """drop_zero_variance: a turn at a new observation whose group's rewards are all equal has advantage 0 and is
    dropped; a turn at a known observation is kept whatever its group."""
    rewards = torch.tensor([1.0, 1.0, 0.5], dtype=torch.float64)
    groups = group_index([{"g": "x"}, {"g": "x"}, {"g": "y"}], ["g"])
    from arena.learners.estimators import EstimatorInput, get_estimator

    turns = card_turns(0)[:3]
    spec = get_estimator("obs_baseline")
    inp = EstimatorInput(rewards=rewards, keys=[{"g": "x"}, {"g": "x"}, {"g": "y"}], roles=["p"] * 3, games=torch.zeros(3, dtype=torch.long),
                         turns=turns, episodes=[], group_by=["g"], drop_zero_variance=True)
    state = {"baselines": {observation_key(turns[0]): 0.25}}
    out = spec.fn(inp, spec.options(), state)
    assert out.keep.tolist() == [True, True, False] and groups.tolist() == [0, 0, 1]
    assert out.advantages.tolist() == approx64([0.75, 0.75, 0.0])  # turns 0 and 1: the K prompt, known
    assert out.extras == [{"observation_baseline": True}] * 2 + [{"observation_baseline": False}]
