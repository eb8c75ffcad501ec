"""OpenSpiel's ``action_mode: score`` (issue #34, "measure the policy that plays"): a model seat's move is
drawn from the model's own normalised likelihood of each legal action name (arena/policies/choices.py),
exactly the policy the exact exploitability scores (arena/loop/exact.py).

The model is the tiny random 2-layer model with SmolLM2's tokenizer (``tiny_model_dir``), its final norm
scaled so the actions' probabilities are far from uniform and the temperature moves them (about 0.63 for
the first action at temperature 2, 0.92 at temperature 1): a backend that ignored the temperature would
play 0.92 where the exact policy says 0.63, which the frequency test tells apart (it asserts so itself).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyspiel
import pytest
import torch
from scipy.stats import chi2

from arena.core.errors import ConfigError
from arena.core.game_types import ActionQuery
from arena.games.openspiel import OpenSpielGame
from arena.games.openspiel.env import observe, render
from arena.games.openspiel.rules import legal_names, parse_action
from arena.loop.exact import model_action_probs
from arena.policies.base import Request, SamplingParams
from arena.policies.choices import action_ids, draw
from arena.runner import Runner, SeatMap, play_one_at_a_time
from tolerance import LOGITS, approx32, close32

ROOT = Path(__file__).resolve().parents[2]
T = 2.0
PARAMS = SamplingParams(temperature=T, max_new_tokens=6)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """An HFPolicy on the tiny random model in float32, logits scaled by 40 (peaked, as in test_exact_model)."""
    from arena.policies.hf import HFPolicy

    policy = HFPolicy(str(tiny_model_dir), dtype="float32", name="tiny")
    with torch.no_grad():
        policy.model.model.norm.weight.mul_(40.0)
    return policy


def kuhn(**settings) -> OpenSpielGame:
    return OpenSpielGame(game="kuhn_poker", action_mode="score", **settings)


def kuhn_queries() -> dict[str, ActionQuery]:
    """Every Kuhn decision (12 information states) as the exact evaluation queries it, by its user prompt."""
    out: dict[str, ActionQuery] = {}

    def visit(state) -> None:
        if state.is_terminal():
            return
        if state.is_chance_node():
            for action, _ in state.chance_outcomes():
                visit(state.child(action))
            return
        player = state.current_player()
        obs = observe("kuhn_poker", state, player)
        messages = render(obs)
        out[messages[-1]["content"]] = ActionQuery(seat=f"player_{player}", messages=messages, observation=obs,
                                                  actions=obs.legal)
        for action in state.legal_actions():
            visit(state.child(action))

    visit(pyspiel.load_game("kuhn_poker").new_initial_state())
    return out


def chi_square(counts: dict[str, Counter], probs: dict[str, list[float]], queries: dict[str, ActionQuery]) -> float:
    """Pearson's ``sum over states s and actions a of (n_sa - n_s p_sa)^2 / (n_s p_sa)``."""
    total = 0.0
    for key, seen in counts.items():
        n = sum(seen.values())
        for action, p in zip(queries[key].actions, probs[key], strict=True):
            total += (seen[action] - n * p) ** 2 / (n * p)
    return total


def test_score_mode_plays_the_exact_policy(tiny) -> None:
    """Over 240 games (about 400 turns) the actions' frequencies at each of Kuhn's information states are
    the exact evaluation's probabilities (model_action_probs at the seat's temperature), by a chi-square
    test at level 0.001; the same counts against the untempered probabilities fail it. Every turn is a
    legal action, its tokens the action's whole-reply tokens, its logprobs as scored."""
    queries = kuhn_queries()
    episodes = Runner(kuhn, {"m": tiny}, SeatMap({"*": "m"}), {"m": PARAMS}, num_envs=64).play(list(range(240)))
    counts: dict[str, Counter] = defaultdict(Counter)
    for ep in episodes:
        assert ep.metrics["invalid_rate"] == 0.0
        for turn in ep.turns:
            key = turn.messages[-1]["content"]
            assert key in queries and turn.valid and turn.completion in queries[key].actions
            assert turn.completion_ids == action_ids(tiny.tokenizer, turn.completion)
            counts[key][turn.completion] += 1
    assert len(counts) == 12 and sum(sum(c.values()) for c in counts.values()) > 350
    exact = {k: model_action_probs(tiny, queries[k], PARAMS) for k in counts}
    threshold = chi2.ppf(0.999, df=sum(len(queries[k].actions) - 1 for k in counts))
    assert chi_square(counts, exact, queries) < threshold
    untempered = {k: model_action_probs(tiny, queries[k], PARAMS.model_copy(update={"temperature": 1.0}))
                  for k in counts}
    assert chi_square(counts, untempered, queries) > 10 * threshold  # the test tells a temperature bug apart


def as_scored(policy, prompt: list[int], comp) -> list[float]:
    """The chosen reply's per-token scores, the last minus ``logsumexp`` of every choice's summed score: they
    sum to ``log P(chosen)`` (arena/policies/choices.py)."""
    import math

    own = policy.score(prompt, comp.completion_ids, PARAMS)
    totals = [sum(own)] + [sum(policy.score(prompt, a, PARAMS)) for a in comp.alternatives]
    top = max(totals)
    return [*own[:-1], own[-1] - (top + math.log(sum(math.exp(t - top) for t in totals)))]


def test_the_completion_is_the_chosen_action_as_scored(tiny) -> None:
    """text = the choice, completion_ids = action_ids(choice), alternatives = the other choices' ids,
    logprobs = policy.score of those tokens, normalised over the choices at the last token."""
    query = next(iter(kuhn_queries().values()))
    request = Request(messages=query.messages, params=PARAMS, seed=3, choices=list(query.actions))
    (comp,) = tiny.generate([request])
    prompt = tiny.encode(request)
    assert comp.text in query.actions and comp.prompt_ids == prompt and comp.finish_reason == "stop"
    assert comp.completion_ids == action_ids(tiny.tokenizer, comp.text)
    assert comp.alternatives == [action_ids(tiny.tokenizer, a) for a in query.actions if a != comp.text]
    assert comp.logprobs == approx32(as_scored(tiny, prompt, comp), scale=LOGITS)
    assert sum(comp.logprobs) < 0
    assert parse_action(comp.text, query.actions) == list(query.actions).index(comp.text)


def test_a_prompt_over_the_context_is_fitted_beside_the_longest_choice(tiny) -> None:
    """overflow end: the request is answered with an overflow completion; truncate: the prompt keeps its last
    tokens, room is left for the longest choice, and the choice is scored after the cut prompt."""
    from arena.policies.hf import HFPolicy

    query = next(iter(kuhn_queries().values()))
    request = Request(messages=query.messages, params=PARAMS, seed=3, choices=list(query.actions))
    longest = max(len(action_ids(tiny.tokenizer, a)) for a in query.actions)
    assert len(tiny.encode(request)) > 64
    ended = HFPolicy(tiny.model, tiny.tokenizer, max_model_len=64, overflow="end")
    assert ended.generate([request])[0].finish_reason == "overflow"
    (comp,) = HFPolicy(tiny.model, tiny.tokenizer, max_model_len=64, overflow="truncate").generate([request])
    assert comp.prompt_truncated and len(comp.prompt_ids) == 64 - longest
    assert comp.prompt_ids == tiny.encode(request)[-(64 - longest):] and comp.text in query.actions
    assert comp.logprobs == approx32(as_scored(tiny, comp.prompt_ids, comp), scale=LOGITS)


def test_seeded_choices_are_reproducible_and_batch_independent(tiny) -> None:
    """The same seeds give the same games batched (16 at once), again, and one turn at a time."""
    seeds = list(range(16))
    runner = Runner(kuhn, {"m": tiny}, SeatMap({"*": "m"}), {"m": PARAMS}, num_envs=16)

    def trace(eps):
        return [[(t.seat, t.completion, t.completion_ids) for t in ep.turns] for ep in eps]

    batched = trace(runner.play(seeds))
    assert batched == trace(runner.play(seeds))
    assert batched == trace([play_one_at_a_time(kuhn(), {"m": tiny}, s, sampling={"m": PARAMS}) for s in seeds])
    assert len({tuple(c for _, c, _ in game) for game in batched}) > 1  # the seeds do change the play


def forwards_of(policy, call):
    """``(call(), number of forward passes of policy.model during it)``, counted by a forward hook."""
    count = [0]
    hook = policy.model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    try:
        return call(), count[0]
    finally:
        hook.remove()


@pytest.mark.parametrize("params", [PARAMS, SamplingParams(temperature=0.0), SamplingParams(temperature=1.0),
                                    SamplingParams(temperature=T, top_p=0.5)], ids=["T2", "greedy", "T1", "top_p"])
def test_score_rows_is_score_row_by_row(tiny, params) -> None:
    """HFPolicy.score_rows (the batched scoring of choices) equals HFPolicy.score of each row, to 1e-5, at every
    sampling transform (top_p's -inf included), with the prompts' common prefix run once and without:
    prompts of different lengths (padding), one prompt repeated (prefilled once), completions of 1 to 5 tokens (padding, and a completion scored by the prefill alone)."""
    queries = list(kuhn_queries().values())
    prompts = [tiny.encode(Request(messages=q.messages, params=params)) for q in queries[:3]]
    prompts[2] = prompts[2][:-17]  # a shorter prompt: the others are left padded
    completions = [action_ids(tiny.tokenizer, t) for t in ("Pass", "Bet", "I bet, surely", "")]
    rows = [(p, c) for p in prompts for c in completions] + [(prompts[0], completions[1])]
    assert min(len(c) for c in completions) == 1 and len({len(c) for c in completions}) >= 3
    shared = tiny.prefill_tokens_shared
    got, forwards = forwards_of(tiny, lambda: tiny.score_rows([p for p, _ in rows], [c for _, c in rows], params))
    assert forwards == 3  # the rules prefix once, the rest of each prompt, then every completion on the cache
    assert tiny.prefill_tokens_shared - shared >= 2 * 100  # the rules, run once for three prompts
    tiny.prefix_sharing = False
    try:
        plain, forwards = forwards_of(tiny, lambda: tiny.score_rows([p for p, _ in rows], [c for _, c in rows], params))
    finally:
        tiny.prefix_sharing = True
    assert forwards == 2  # prefill, then every completion on its cache
    for (prompt, comp), scores, unshared in zip(rows, got, plain, strict=True):
        alone = torch.tensor(tiny.score(prompt, comp, params))
        close32(torch.tensor(scores), alone, scale=LOGITS)
        close32(torch.tensor(unshared), alone, scale=LOGITS)
    if params.top_p < 1:
        assert any(s == float("-inf") for row in got for s in row)  # the nucleus cut is exercised


def test_choices_of_a_generate_call_are_scored_in_batches(tiny) -> None:
    """16 requests of 2 choices: one batch of three forwards at the default limits (the shared rules run once);
    at max_batch_size 5 (two requests' choices a batch) eight batches; the same draws and, to 1e-5, the same logprobs either way, which
    equal the choices scored one row at a time (as_scored)."""
    from arena.policies.hf import HFPolicy

    queries = list(kuhn_queries().values())
    requests = [Request(messages=queries[k % len(queries)].messages, params=PARAMS, seed=k,
                        choices=list(queries[k % len(queries)].actions)) for k in range(16)]
    batched, forwards = forwards_of(tiny, lambda: tiny.generate(requests))
    assert forwards == 3  # the rules prefix, the rest of the prompts, the choices
    small = HFPolicy(tiny.model, tiny.tokenizer, max_batch_size=5)
    split, forwards = forwards_of(small, lambda: small.generate(requests))
    assert forwards == 8 * 3
    for req, a, b in zip(requests, batched, split, strict=True):
        assert a.text == b.text and a.completion_ids == b.completion_ids and a.alternatives == b.alternatives
        close32(torch.tensor(a.logprobs), torch.tensor(b.logprobs), scale=LOGITS)
        close32(torch.tensor(a.logprobs), torch.tensor(as_scored(tiny, tiny.encode(req), a)), scale=LOGITS)
    assert tiny.tokens_generated >= sum(len(c.completion_ids) for c in batched)


def test_scripted_bots_ignore_choices(tiny) -> None:
    """A bot seat in a score-mode game plays its own reply; the model seat still chooses a legal action."""
    from arena.games.openspiel.bots import BOTS
    from arena.policies.scripted import ScriptedPolicy

    runner = Runner(kuhn, {"m": tiny, "cfr": ScriptedPolicy(BOTS["cfr"], name="cfr")},
                    SeatMap({"player_0": "m", "player_1": "cfr"}), {"m": PARAMS}, num_envs=8)
    for ep in runner.play(list(range(8))):
        assert ep.metrics["invalid_rate"] == 0.0
        assert all(t.completion_ids == [] for t in ep.turns if t.seat == "player_1")
        assert all(t.completion_ids for t in ep.turns if t.seat == "player_0")


def test_generate_mode_hands_out_no_choices() -> None:
    env = OpenSpielGame(game="kuhn_poker")
    env.reset(seed=0)
    assert env.action_choices(env.agent_selection) is None and not env.uses_choices()
    env = kuhn()
    env.reset(seed=0)
    other = "player_1" if env.agent_selection == "player_0" else "player_0"
    assert env.action_choices(env.agent_selection) == ["Pass", "Bet"] and env.action_choices(other) is None


@pytest.mark.parametrize("name", ("kuhn_poker", "leduc_poker", "tic_tac_toe", "liars_dice"))
def test_every_choice_parses_as_its_own_action(name: str) -> None:
    """In score mode the completion is a legal name as the whole reply; it must play that very action (so
    the invalid rate is 0): checked at every decision of 30 random games."""
    rng = np.random.default_rng(0)
    for seed in range(30):
        env = OpenSpielGame(game=name, action_mode="score")
        env.reset(seed=seed)
        while not env.done:
            seat = env.agent_selection
            choices = env.action_choices(seat)
            assert choices == legal_names(env.os_state, env.os_state.current_player())
            for i, text in enumerate(choices):
                assert parse_action(text, choices) == i, (text, choices)
            k = int(rng.integers(len(choices)))
            before, ids = len(env.os_state.history()), env.os_state.legal_actions()
            env.step(choices[k])
            assert env.turns[-1].valid and env.os_state.history()[before] == ids[k]


def test_draw_follows_the_probabilities() -> None:
    """draw(p, seed): deterministic per seed; a zero-probability index is never drawn; over 4000 seeds the
    frequencies of (0.2, 0.5, 0.3) are within 4 standard errors."""
    assert all(draw([0.0, 1.0, 0.0], s) == 1 for s in range(200))
    assert [draw([0.5, 0.5], s) for s in range(50)] == [draw([0.5, 0.5], s) for s in range(50)]
    n, probs = 4000, [0.2, 0.5, 0.3]
    seen = Counter(draw(probs, s) for s in range(n))
    for i, p in enumerate(probs):
        assert abs(seen[i] - n * p) < 4 * (n * p * (1 - p)) ** 0.5, seen


def test_backends_that_cannot_score_refuse_choices() -> None:
    from arena.policies.openai import OpenAIPolicy

    policy = OpenAIPolicy("http://127.0.0.1:9", "m", api="chat")  # no server is asked: it refuses first
    with pytest.raises(ValueError, match="backend openai cannot choose"):
        policy.generate([Request(messages=[{"role": "user", "content": "x"}], choices=["a"])])


@pytest.mark.parametrize(("args", "expect"), [
    (["--set", "game.action_mode=sample"], "game.action_mode"),
    (["--set", "game.action_mode=score", "--set", "policies.learner.backend=vllm"],
     "policies.learner.backend: 'vllm' cannot play seat player_0 by scoring its legal actions"),
])
def test_bad_action_mode_and_backend_are_one_config_error_line(args: list[str], expect: str) -> None:
    from arena.rank.eval import main

    with pytest.raises(ConfigError) as err:
        main(["exploitability", str(ROOT / "arena/games/openspiel/kuhn.yaml"), *args])
    assert expect in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_kuhn_score_yaml_is_kuhn_yaml_in_score_mode() -> None:
    from arena.loop.config import load_config

    score, plain = (load_config(ROOT / f"arena/games/openspiel/{n}.yaml") for n in ("kuhn.score", "kuhn"))
    assert score.game.settings.action_mode == "score" and plain.game.settings.action_mode == "generate"
    assert score.learner == plain.learner and score.policies == plain.policies


def test_leduc_score_yaml_is_leduc_yaml_in_score_mode_at_kuhn_score_settings() -> None:
    """leduc.score.yaml: Leduc with kuhn.score.yaml's policy and learner (lr 1e-4, float32), in score mode; only
    the micro-batches are smaller (the same update: micro-batched equals full-batch)."""
    from arena.loop.config import load_config

    leduc, kuhn = (load_config(ROOT / f"arena/games/openspiel/{n}.yaml") for n in ("leduc.score", "kuhn.score"))
    assert leduc.game.settings.action_mode == "score" and leduc.game.settings.game == "leduc_poker"
    assert leduc.learner.model_copy(update={"token_budget": 8192}) == kuhn.learner and leduc.learner.token_budget == 2048
    assert leduc.policies == kuhn.policies and leduc.train.steps == kuhn.train.steps


@pytest.mark.slow
def test_kuhn_score_trains_one_step_with_the_builtin_model(tmp_path: Path) -> None:
    """kuhn.score.yaml, 4 games, one step (about 40 s on 2 cores): no invalid turn, every turn a sample, the
    learner's logprobs of the scored replies equal the generator's (the ratio starts at 1), a gradient."""
    import json

    from arena.train import main

    run = tmp_path / "run"
    assert main([str(ROOT / "arena/games/openspiel/kuhn.score.yaml"), "--max-steps", "1", "--run-dir", str(run),
                 "--set", "train.games_per_step=4", "--set", "runner.num_envs=4", "--set", "runner.progress=false",
                 "--set", "train.evals=[]", "--set", "train.plot=false"]) == 0
    (row,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert row["game/invalid_rate"] == 0.0 and row["samples"] >= 8
    assert row["logprob_gap"] < 1e-4 and row["grad_norm"] > 0
