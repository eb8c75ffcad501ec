"""Episodes -> samples: a golden check against the pre-registry code, credit, weights, extras."""

from __future__ import annotations

import random

import pytest
import torch

from arena.core.types import Episode, Turn
from arena.learners.config import LearnerConfig
from arena.learners.estimators import EstimatorStates
from arena.learners.samples import build_samples
from tolerance import approx32, within

SEATS = ["player_0", "player_1", "player_2", "player_3"]


def make_episodes(n: int, seed: int = 0) -> list[Episode]:
    """SpyRL-shaped episodes: one perform and one vote turn per seat; one scripted seat, one empty turn."""
    rng = random.Random(seed)
    episodes = []
    for e in range(n):
        spy = rng.choice(SEATS)
        roles = {s: "spy" if s == spy else "civilian" for s in SEATS}
        turns = []
        for phase in ("perform", "vote"):
            for s in SEATS:
                reward = rng.choice([0.0, 1.0]) if phase == "vote" and e % 3 else round(rng.uniform(-1, 1), 3)
                policy = "scripted" if (e == 2 and s == "player_3") else "learner"
                ids = [] if (e == 1 and s == "player_1" and phase == "vote") else [rng.randrange(50) for _ in range(3)]
                turns.append(Turn(
                    index=len(turns), seat=s, role=roles[s], phase=phase, messages=[], completion="x",
                    reward=reward, group={"episode": f"ep{e}", "phase": phase, "role": roles[s]}, policy=policy,
                    prompt_ids=[1, 2, e], completion_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop",
                ))
        rewards = {s: sum(t.reward for t in turns if t.seat == s) for s in SEATS}
        episodes.append(Episode(episode_id=f"ep{e}", game="spy_v0", turns=turns, rewards=rewards, roles=roles))
    return episodes


# ---- the code before the estimator registry, verbatim in its arithmetic (the golden reference)
def _old_group_index(keys, by):
    ids: dict = {}
    return torch.tensor([ids.setdefault(tuple(k.get(n, "") for n in by), len(ids)) for k in keys], dtype=torch.long)


def _old_group_mean_std(values, groups):
    n_groups = int(groups.max()) + 1 if groups.numel() else 0
    count = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, groups, torch.ones_like(values))
    total = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, groups, values)
    mean = (total / count)[groups]
    sq = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, groups, (values - mean) ** 2)
    return mean, (sq / count).sqrt()[groups]


def _old_rae(values, alpha, order, rewards, roles, games, eps=1e-6):
    adv = torch.zeros_like(rewards)
    for g in torch.unique(games, sorted=True).tolist():
        idx = (games == g).nonzero().flatten()
        by_role: dict = {}
        for i in idx.tolist():
            by_role.setdefault(roles[i], []).append(i)
        for role, members in by_role.items():
            r_mean = float(rewards[members].mean())
            before = values.get(role, 0.0)
            after = alpha * before + (1 - alpha) * r_mean
            values[role] = after
            adv[members] = rewards[members] - (after if order == "code" else before)
        if order == "code":
            game_adv = adv[idx]
            adv[idx] = (game_adv - game_adv.mean()) / (game_adv.std(unbiased=False) + eps)
    return adv, (adv != 0 if order == "spiral" else torch.ones_like(adv, dtype=torch.bool))


def old_build_samples(episodes, phases, estimators, values, rae, drop=True):
    out, stats = [], {}
    for phase in phases:
        if phase not in estimators:
            continue
        name, group_by = estimators[phase]
        turns, games = [], []
        for g, ep in enumerate(episodes):
            for t in ep.turns_of(phase=phase):
                if t.policy == "learner" and t.completion_ids:
                    turns.append(t)
                    games.append(g)
        rewards = torch.tensor([t.reward for t in turns], dtype=torch.float64)
        if name == "rae":
            adv, keep = _old_rae(values, *rae, rewards, [t.role for t in turns], torch.tensor(games))
        else:
            groups = _old_group_index([t.group for t in turns], group_by)
            mean, std = _old_group_mean_std(rewards, groups)
            adv = (rewards - mean) / (std + 1e-6) if name == "grpo" else rewards - mean
            keep = ~(std <= 1e-8) if drop else torch.ones_like(adv, dtype=torch.bool)
        stats.update({f"{phase}/turns": float(len(turns)), f"{phase}/dropped": float((~keep).sum()),
                      f"{phase}/reward_mean": float(rewards.mean())})
        out += [(phase, turns[i].prompt_ids, turns[i].completion_ids, float(adv[i])) for i in keep.nonzero().flatten().tolist()]
    return out, stats


@pytest.mark.parametrize("order", ["paper", "code", "spiral"])
@pytest.mark.parametrize("vote", ["grpo", "dr_grpo"])
@pytest.mark.parametrize("drop", [True, False])
def test_golden_equals_the_pre_registry_code_bit_for_bit(order: str, vote: str, drop: bool) -> None:
    cfg = LearnerConfig(drop_zero_variance=drop, estimators={
        "perform": {"name": "rae", "options": {"order": order, "alpha": 0.7}},
        "vote": {"name": vote, "group_by": ["episode", "phase"]},
    })
    states = EstimatorStates(cfg.estimators)
    values: dict = {}
    for step in range(3):  # the RAE baselines carry over between steps
        episodes = make_episodes(6, seed=step)
        phases = ["vote", "perform"] if step % 2 else ["perform", "vote"]
        samples, stats = build_samples(episodes, phases, cfg, states, "learner")
        expected, old_stats = old_build_samples(
            episodes, phases, {"perform": ("rae", []), "vote": (vote, ["episode", "phase"])}, values, (0.7, order), drop
        )
        got = [(s.phase, s.prompt_ids, s.completion_ids, s.advantage) for s in samples]
        assert got == expected and stats == old_stats
        assert states.metrics() == {f"rae/{k}": v for k, v in values.items()}


def test_only_the_trainable_policys_turns_with_tokens_are_trained() -> None:
    cfg = LearnerConfig(estimators={"vote": {"name": "dr_grpo"}})
    episodes = make_episodes(3)
    samples, stats = build_samples(episodes, ["vote"], cfg, EstimatorStates(cfg.estimators), "learner")
    assert stats["vote/turns"] == 10  # 12 vote turns less one scripted, one without tokens
    none, _ = build_samples(episodes, ["vote"], cfg, EstimatorStates(cfg.estimators), "trainable")
    assert none == []


def tiny_episode(rewards: dict[str, float], turns: list[tuple[str, float]], eid: str = "e") -> Episode:
    return Episode(
        episode_id=eid, game="g_v0", rewards=rewards, roles={s: s for s in rewards},
        turns=[
            Turn(index=i, seat=s, role=s, phase="talk", messages=[], completion="x", reward=r, policy="p",
                 group={"episode": eid, "phase": "talk"}, prompt_ids=[i], completion_ids=[7, i + 1],
                 finish_reason="length" if i == 1 else "stop")
            for i, (s, r) in enumerate(turns)
        ],
    )


def test_trajectory_credit_gives_each_turn_its_seats_episode_return() -> None:
    # seat a (return 3.0) speaks twice, seat b (return -1.0) once; per-turn rewards differ.
    ep = tiny_episode({"a": 3.0, "b": -1.0}, [("a", 1.0), ("b", 0.5), ("a", 0.0)])
    base = {"name": "dr_grpo", "group_by": ["episode"]}
    cfg = LearnerConfig(estimators={"talk": base | {"credit": "trajectory", "trajectory_stats": "turn"}})
    samples, stats = build_samples([ep], ["talk"], cfg, EstimatorStates(cfg.estimators), "p")
    # rewards 3, -1, 3: mean 5/3 -> 4/3, -8/3, 4/3
    assert [s.advantage for s in samples] == pytest.approx([4 / 3, -8 / 3, 4 / 3])
    assert [s.extras["reward"] for s in samples] == [3.0, -1.0, 3.0]
    assert stats["talk/reward_mean"] == pytest.approx(5 / 3)
    turn_cfg = LearnerConfig(estimators={"talk": base})
    per_turn, _ = build_samples([ep], ["talk"], turn_cfg, EstimatorStates(turn_cfg.estimators), "p")
    assert [s.advantage for s in per_turn] == pytest.approx([0.5, 0.0, -0.5])


def test_trajectory_credit_attempt_stats_count_each_attempt_once() -> None:
    """The audit's case: two attempts of 5 and 21 turns, returns -0.3 and 0. GRPO over the G
    attempts (default) gives -1 / +1; counting turns (verl-agent per-step) gives -2.05 / +0.49."""
    ep = tiny_episode({"a": -0.3, "b": 0.0}, [("a", 0.0)] * 5 + [("b", 0.0)] * 21)
    ep.turns.insert(3, ep.turns.pop(10))  # interleaved turns, as attempts act in turn
    seats = [t.seat for t in ep.turns]
    for stats_mode, want_a, want_b in (("attempt", -1.0, 1.0), ("turn", -2.04937, 0.48795)):
        est = {"name": "grpo", "group_by": ["episode"], "credit": "trajectory"}
        cfg = LearnerConfig(estimators={"talk": est | ({"trajectory_stats": stats_mode} if stats_mode == "turn" else {})})
        assert cfg.estimators["talk"].trajectory_stats == stats_mode
        samples, stats = build_samples([ep], ["talk"], cfg, EstimatorStates(cfg.estimators), "p")
        assert len(samples) == 26 and stats["talk/turns"] == 26.0
        want = [want_a if s == "a" else want_b for s in seats]
        assert [s.advantage for s in samples] == approx32(want), stats_mode
    # hand: turns: mean -1.5/26, population std 0.118234; (-0.3 + 1.5/26) / 0.118231 = -2.04937
    mean = -1.5 / 26
    std = ((5 * (-0.3 - mean) ** 2 + 21 * mean**2) / 26) ** 0.5
    assert (-0.3 - mean) / std == within(-2.04939, 1e-5, "written to 5 decimals") and -mean / std == within(0.48795, 1e-5, "written to 5 decimals")


def test_trajectory_credit_attempt_stats_carry_estimator_extras_to_every_turn() -> None:
    ep = tiny_episode({"a": 1.0, "b": 0.0}, [("a", 0.0), ("b", 0.0), ("a", 0.0)])
    cfg = LearnerConfig(estimators={"talk": {"name": "dr_grpo", "group_by": ["episode"], "credit": "trajectory"}})
    samples, _ = build_samples([ep], ["talk"], cfg, EstimatorStates(cfg.estimators), "p")
    assert [s.advantage for s in samples] == pytest.approx([0.5, -0.5, 0.5])  # attempts: mean 0.5


def test_trajectory_credit_needs_the_seats_total() -> None:
    ep = tiny_episode({"a": 1.0}, [("a", 1.0), ("b", 0.0)])
    cfg = LearnerConfig(estimators={"talk": {"name": "grpo", "credit": "trajectory"}})
    with pytest.raises(ValueError, match="episode e has no total reward for seat 'b'"):
        build_samples([ep], ["talk"], cfg, EstimatorStates(cfg.estimators), "p")


def test_loss_weight_extras_dedupe_and_unestimated_phases() -> None:
    eps = [tiny_episode({"a": 0, "b": 0}, [("a", 1.0), ("b", 0.25)], "e0"), tiny_episode({"a": 0}, [("a", 2.0)], "e1")]
    cfg = LearnerConfig(estimators={"talk": {"name": "grpo", "group_by": ["episode"], "loss_weight": 0.3}})
    samples, stats = build_samples(eps, ["talk", "other", "talk"], cfg, EstimatorStates(cfg.estimators), "p")
    assert len(samples) == 2, "e1's lone turn has no variance; 'talk' listed twice trains once"
    assert stats == {"talk/turns": 3.0, "talk/dropped": 1.0, "talk/reward_mean": pytest.approx(3.25 / 3)}
    assert all(s.weight == 0.3 and s.phase == "talk" for s in samples)
    assert [s.extras for s in samples] == [
        {"group": "e0", "finish_reason": "stop", "reward": 1.0},
        {"group": "e0", "finish_reason": "length", "reward": 0.25},
    ]
    keep_cfg = LearnerConfig(estimators={"talk": {"name": "grpo", "group_by": ["episode"], "drop_zero_variance": False}})
    kept, _ = build_samples(eps, ["talk"], keep_cfg, EstimatorStates(keep_cfg.estimators), "p")
    assert len(kept) == 3, "the estimator's own flag overrides the learner default"
