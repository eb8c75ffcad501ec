"""LSP: rewards, advantages, conformance (fast: scripted seats and hand-written texts); the pure rules' own
tests are in test_lsp_values.py."""

from __future__ import annotations


import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from arena.loop.config import load_config
from arena.runner import Runner, SeatMap
from arena.testing import check_any_text_is_legal, check_game, completions, play_texts
from arena.games.lsp import LspGame
from arena.games.lsp.bots import BOTS, coder_bot, default_bot
from arena.games.lsp.rules import challenger_reward, solver_rewards
from arena.learners.config import LearnerConfig
from arena.learners.estimators import EstimatorStates
from arena.learners.samples import build_samples
from arena.policies.scripted import ScriptedPolicy, random_bot
from tolerance import approx64, close64, scale_of

CONFIGS = {
    "paper": {},
    "zero_rm": {"mode": "lsp_zero"},
    "lsp_verifier": {"task_reward": "verifier", "query_format": "lenient"},
    "zero_verifier": {"task_reward": "verifier", "mode": "lsp_zero"},
    "retry": {"task_reward": "verifier", "invalid": {"mode": "retry", "retries": 2}},
}
Q = "[Start Generation]\nWhat is 12 + 30?\n[End Generation]"


# ------------------------------------------------------------------ the game
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_conformance_kit(name: str) -> None:
    check_game(lambda: LspGame(**CONFIGS[name]), bot=default_bot)
    check_game(lambda: LspGame(**CONFIGS[name]))


@pytest.mark.parametrize("name", sorted(CONFIGS))
@given(texts=st.lists(completions(), min_size=1, max_size=6))
def test_any_string_from_any_seat_never_raises(name: str, texts: list[str]) -> None:
    check_any_text_is_legal(lambda: LspGame(**CONFIGS[name]), texts)
    check_any_text_is_legal(lambda: LspGame(**CONFIGS[name]), [Q, *texts])  # past the challenger too


@given(judge=completions())
def test_r_q_is_an_integer_in_0_to_7_whatever_the_judge_writes(judge: str) -> None:
    env = LspGame(task_reward="verifier", n_solvers=2)
    ep = play_texts(env, 0, [Q, "42", "41", judge, judge])
    assert [t.seat for t in ep.turns] == ["challenger_0", "solver_0", "solver_1", "judge_0", "judge_1"]
    for j, r in ((0, 1.0), (1, 0.0)):
        r_q = ep.rewards[f"solver_{j}"] - r
        assert r_q == int(r_q) and 0 <= r_q <= 7
    assert ep.metrics["R_Q"] in [k / 1 for k in range(8)]
    assert 0 <= ep.metrics["judge_unparseable_rate"] <= 1
    assert all(t.valid for t in ep.turns), "an unparseable verdict is not an invalid turn"


def test_lsp_zero_plays_no_judge_seat() -> None:
    zero = LspGame(task_reward="verifier", mode="lsp_zero")
    assert not [s for s in zero.possible_agents if s.startswith(("judge", "reward"))]
    ep = play_texts(zero, 0, [Q, "42", "0", "42", "1"])
    assert {t.phase for t in ep.turns} == {"challenge", "solve"}
    assert ep.rewards["challenger_0"] == -0.5 and ep.rewards["solver_0"] == 1.0
    rm_zero = LspGame(mode="lsp_zero", n_solvers=2)
    assert [s for s in rm_zero.possible_agents if s.startswith(("judge", "reward"))] == ["reward_0", "reward_1"]
    ep = play_texts(rm_zero, 0, [Q, "a", "b", "0.5", "nonsense"])
    assert ep.rewards["solver_0"] == 0.5 and ep.rewards["solver_1"] == 0.0  # unparseable_reward
    assert ep.metrics["rm_unparseable_rate"] == 0.5 and "R_Q" not in ep.metrics


def test_lsp_rewards_by_hand() -> None:
    env = LspGame(n_solvers=2)  # reward model + judge
    ep = play_texts(env, 0, [Q, "a0", "a1", "2.0", "-1.0", "<Score>7</Score>", "junk"])
    # R = (2, -1), R_Q = (7, 0 unparseable): solvers R + R_Q, challenger -V + V_Q = -0.5 + 3.5
    assert ep.rewards == pytest.approx({"challenger_0": 3.0, "solver_0": 9.0, "solver_1": -1.0,
                                        "reward_0": 0.0, "reward_1": 0.0, "judge_0": 0.0, "judge_1": 0.0})
    assert ep.metrics["judge_unparseable_rate"] == 0.5
    judge_turn = next(t for t in ep.turns if t.seat == "judge_1")
    assert "a1" in judge_turn.messages[0]["content"] and "a0" not in judge_turn.messages[0]["content"]
    solver_turn = next(t for t in ep.turns if t.seat == "solver_0")
    assert solver_turn.messages == [{"role": "user", "content": "What is 12 + 30?"}]  # raw query, no system prompt
    reward_turn = next(t for t in ep.turns if t.seat == "reward_0")
    assert reward_turn.messages == [{"role": "user", "content": "What is 12 + 30?"}, {"role": "assistant", "content": "a0"}]


def test_no_query_ends_the_game_with_the_penalty() -> None:
    ep = play_texts(LspGame(), 0, ["I will not write a query."])
    assert [t.seat for t in ep.turns] == ["challenger_0"]
    assert ep.rewards["challenger_0"] == -1.0 and ep.metrics == {"no_query": 1.0}
    assert "no query" in ep.info["no_query_reason"]
    ep = play_texts(LspGame(task_reward="verifier"), 0, ["[Start Generation]Write a poem.[End Generation]"])
    assert "arithmetic" in ep.info["no_query_reason"] and ep.rewards["challenger_0"] == -1.0


def test_configs_load_with_lsp_estimators() -> None:
    for path in ("games/lsp/lsp.yaml", "games/lsp/lsp.paper.yaml", "lsp"):
        cfg = load_config(path)
        est = cfg.learner.estimators
        assert est["challenge"].name == "lsp_challenger" and est["solve"].name == "lsp_solver"
        assert cfg.learner.loss == "reinforce" and cfg.learner.beta == 0.05
    paper = load_config("games/lsp/lsp.paper.yaml")
    assert paper.policies["rm"].model == "Skywork/Skywork-Reward-V2-Llama-3.2-3B"
    # Two trainable policies (issue #36): the solvers are `learner` (the checkpoint's model/), the challenger
    # its own policy; otherwise lsp.yaml in lsp_zero mode, the shared-weight arm of bench/methods.py lsp_roles.
    roles, shared = load_config("games/lsp/lsp.roles.yaml"), load_config("games/lsp/lsp.yaml", ["game.mode=lsp_zero"])
    assert roles.trainables == ["learner", "challenger"] and roles.game.settings == shared.game.settings
    assert dict(roles.seat_table()) == {"challenger_*": "challenger", "solver_*": "learner", "judge_*": "judge"}
    assert roles.learner == shared.learner and roles.train.steps == shared.train.steps
    assert roles.policies["challenger"].phase_sampling == shared.policies["learner"].phase_sampling


def test_a_config_that_omits_the_keys_gets_the_papers_settings() -> None:
    """LSP's training defaults (issue #24): lr 3e-6 and 8 queries per step (the global defaults, 1e-6
    and 128, are SpyRL's), each role's loss its own mean (L_sol + alpha_ch L_ch), no sample dropped."""
    from arena.loop.config import parse_config

    cfg = parse_config({"game": {"name": "lsp"}})
    assert cfg.learner.lr == 3e-6 and cfg.train.games_per_step == 8
    assert cfg.learner.aggregate_per_phase is True and cfg.learner.drop_zero_variance is False
    assert cfg.learner.beta == 0.05 and cfg.learner.loss == "reinforce" and cfg.learner.kl_estimator == "k1"
    cpu = load_config("games/lsp/lsp.yaml")  # the CPU config keeps its short-run lr and budget
    assert cpu.learner.lr == 1e-5 and cpu.train.games_per_step == 4 and cpu.learner.aggregate_per_phase
    paper = load_config("games/lsp/lsp.paper.yaml")
    assert paper.learner.lr == 3e-6 and paper.train.games_per_step == 8 and not paper.learner.drop_zero_variance


def test_one_solver_keeps_every_solver_sample() -> None:
    """The audit's case: with G = 1 every solver group has one reward (no variance); dropping such
    groups (the old default) dropped every solver sample and its KL term."""
    episodes = _episodes(CONFIGS["zero_verifier"] | {"n_solvers": 1}, default_bot, n=4)
    defaults = LspGame.training_defaults["learner"]
    cfg = LearnerConfig(**{k: v for k, v in defaults.items()})
    samples, stats = build_samples(episodes, ["challenge", "solve"], cfg, EstimatorStates(cfg.estimators), "learner")
    solvers = [s for s in samples if s.phase == "solve"]
    assert len(solvers) == 4 and stats["solve/dropped"] == 0.0 and all(s.advantage == 0.0 for s in solvers)
    assert len(_samples(episodes, drop=True)) < len(samples)


# ------------------------------------------------------------------ advantages
def _episodes(settings: dict, bot, n: int = 6) -> list:
    policy = ScriptedPolicy(bot, name="learner")
    runner = Runner(lambda: LspGame(**settings), {"learner": policy}, SeatMap({"*": "learner"}), num_envs=3)
    episodes = runner.play(list(range(n)))
    for ep in episodes:  # scripted turns carry no tokens; give the trainable ones some
        for t in ep.turns:
            if t.role in ("challenger", "solver"):
                t.prompt_ids, t.completion_ids, t.logprobs = [1, 2], [3], [-0.5]
    return episodes


def _samples(episodes: list, drop: bool = False) -> list:
    defaults = LspGame.training_defaults["learner"]
    cfg = LearnerConfig(estimators=defaults["estimators"], drop_zero_variance=drop)
    samples, _ = build_samples(episodes, ["challenge", "solve"], cfg, EstimatorStates(cfg.estimators), "learner")
    return samples


@pytest.mark.parametrize("name", ["paper", "zero_rm", "lsp_verifier", "zero_verifier"])
@pytest.mark.parametrize("seed", [0, 1])
def test_solver_advantages_sum_to_zero_per_query_and_challenger_over_the_step(name: str, seed: int) -> None:
    episodes = _episodes(CONFIGS[name] | {"n_solvers": 3}, default_bot, n=5 + seed)
    samples = _samples(episodes)
    by_query: dict[str, list[float]] = {}
    for s in samples:
        if s.phase == "solve":
            by_query.setdefault(s.extras["group"], []).append(s.advantage)
    assert len(by_query) == len(episodes) and all(len(v) == 3 for v in by_query.values())
    for adv in by_query.values():
        assert sum(adv) == approx64(0.0, scale=scale_of(adv))
    challenger = [s for s in samples if s.phase == "challenge"]
    assert len(challenger) == len(episodes)
    assert sum(s.advantage for s in challenger) == approx64(0.0, scale=scale_of([s.advantage for s in challenger]))


def test_challenger_advantage_is_mean_v_minus_v_in_lsp_zero() -> None:
    episodes = _episodes(CONFIGS["zero_verifier"], default_bot, n=8)
    v = torch.tensor([ep.metrics["R"] for ep in episodes], dtype=torch.float64)
    got = torch.tensor([s.advantage for s in _samples(episodes) if s.phase == "challenge"], dtype=torch.float64)
    close64(got, v.mean() - v)


# ------------------------------------------------------------------ watch metrics
def test_reward_hacking_metrics() -> None:
    env = LspGame(task_reward="verifier", mode="lsp_zero")
    plain = _episodes(CONFIGS["zero_verifier"], default_bot)
    coded = _episodes(CONFIGS["zero_verifier"], coder_bot)
    assert all(ep.metrics["code_answer_share"] == 0.0 for ep in plain)
    assert all(ep.metrics["code_answer_share"] == 1.0 for ep in coded)
    assert all(ep.metrics["query_words"] == 5 and ep.metrics["answer_words"] > 0 for ep in plain)
    step = env.step_metrics(plain)
    assert 0 < step["query_distinct_n"] <= 1 and step["V_spread"] >= 0
    same = env.step_metrics([play_texts(LspGame(task_reward="verifier", mode="lsp_zero"), s, [Q, "42"]) for s in range(3)])
    assert same["query_distinct_n"] == pytest.approx(3 / 9) and same["V_spread"] == 0.0
    assert set(BOTS) == {"default", "coder", "template"}
    assert env.step_metrics([play_texts(LspGame(), 0, ["no query"])]) == {}


def test_template_bot_asks_the_training_template_family_and_the_verifier_scores_it() -> None:
    """bench/methods.py's held-out LSP queries: two whole numbers from 1 to 20 and + or -, each checkable."""
    import re

    from arena.games.lsp.bots import template_bot
    from arena.games.lsp.rules import arithmetic_target

    episodes = _episodes(CONFIGS["zero_verifier"], template_bot, n=24)
    seen = set()
    for ep in episodes:
        m = re.fullmatch(r"What is (\d+) ([+-]) (\d+)\?", ep.info["query"])
        assert m and 1 <= int(m[1]) <= 20 and 1 <= int(m[3]) <= 20, ep.info["query"]
        assert isinstance(arithmetic_target(ep.info["query"]), int)
        seen.add(m[2])
        assert 0.0 <= ep.metrics["R"] <= 1.0
    assert seen == {"+", "-"}


def test_random_seats_end_every_game() -> None:
    runner = Runner(lambda: LspGame(n_solvers=2), {"r": ScriptedPolicy(random_bot, name="r")}, SeatMap({"*": "r"}), num_envs=2)
    episodes = runner.play(list(range(4)))
    assert all(ep.metrics.get("no_query") == 1.0 for ep in episodes)  # random text has no markers
