"""A model's exact action probabilities against a reference computed from its raw logits (issue #34).

The model is a tiny randomly initialised 2-layer model with SmolLM2's real tokenizer and chat
template (built in memory, seconds; its final norm is scaled so the distributions are peaked and a
temperature or a missing token changes the answer). The reference does not go through the policy:
the chat prompt, then the action's tokens and the end-of-turn token, one forward pass of the
transformers model, ``log_softmax(logits / T)``, summed, and normalised over the legal actions.
Not in ``make mutation`` (it loads torch and a model); tests/arena/test_exact_yardstick.py is.
"""

from __future__ import annotations

import math

import pytest
import torch

from arena.core.game_types import ActionQuery
from arena.games.openspiel import OpenSpielGame
from arena.games.openspiel.env import render
from arena.loop.exact import model_action_probs, policies_action_probs
from arena.policies.base import SamplingParams, chat_prompt_ids
from tolerance import LOGITS, approx32


@pytest.fixture(scope="module")
def tiny_policy():
    """An HFPolicy on a tiny random model (SmolLM2's tokenizer), float32, peaked logits."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from arena.core.models import resolve_model
    from arena.policies.hf import HFPolicy

    source = resolve_model("smollm2-135m")
    cfg = AutoConfig.from_pretrained(source)
    cfg.update({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 8})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).float().eval()
    with torch.no_grad():
        model.model.norm.weight.mul_(40.0)  # near-uniform logits otherwise: every answer would be ~1/k
    return HFPolicy(model, AutoTokenizer.from_pretrained(source), name="tiny")


def _queries() -> list[ActionQuery]:
    """Kuhn's first decision and the one after a bet (two legal actions each), and Leduc's first (three)."""
    out = []
    for game, replies in (("kuhn_poker", []), ("kuhn_poker", ["Bet"]), ("leduc_poker", [])):
        env = OpenSpielGame(game=game)
        env.reset(seed=1)
        for reply in replies:
            env.step(reply)
        obs = env.observe(env.agent_selection)
        out.append(ActionQuery(seat=env.agent_selection, messages=render(obs), observation=obs, actions=obs.legal))
    return out


@torch.no_grad()
def reference_probs(policy, query: ActionQuery, temperature: float) -> list[float]:
    tok, model = policy.tokenizer, policy.model
    prompt = chat_prompt_ids(tok, query.messages)
    end = tok.convert_tokens_to_ids("<|im_end|>")  # what the model writes to end its reply
    scores = []
    for action in query.actions:
        completion = tok.encode(action, add_special_tokens=False) + [end]
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1: -1].float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        scores.append(float(logp.gather(-1, torch.tensor(completion)[:, None]).sum()))
    m = max(scores)
    return [math.exp(s - m) / sum(math.exp(x - m) for x in scores) for s in scores]


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_tiny_model_action_probs_are_the_tempered_whole_reply_likelihoods(tiny_policy, temperature: float) -> None:
    for query in _queries():
        got = model_action_probs(tiny_policy, query, SamplingParams(temperature=temperature))
        assert got == approx32(reference_probs(tiny_policy, query, temperature), scale=LOGITS), query.actions


def test_tiny_model_reference_is_sensitive_to_what_it_checks(tiny_policy) -> None:
    """The model is peaked enough that the checks above mean something: the temperature applied twice,
    or the end-of-turn token left out, moves every answer by far more than the tolerance."""
    query = _queries()[0]
    once = reference_probs(tiny_policy, query, 0.5)
    assert max(abs(a - b) for a, b in zip(once, reference_probs(tiny_policy, query, 0.25), strict=True)) > 1e-3
    tok, model = tiny_policy.tokenizer, tiny_policy.model
    prompt = chat_prompt_ids(tok, query.messages)
    with torch.no_grad():
        ends = []
        for action in query.actions:
            ids = prompt + tok.encode(action, add_special_tokens=False)
            ends.append(float(torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1], -1)[tok.eos_token_id]))
    assert abs(ends[0] - ends[1]) > 1e-3  # the end token's score differs between the actions


def test_tiny_model_seat_probs_use_the_seats_sampling_temperature(tiny_policy) -> None:
    """policies_action_probs hands each query to its seat's policy at that policy's sampling temperature."""
    queries = _queries()[:2]
    probs = policies_action_probs({"learner": tiny_policy}, lambda seat: "learner",
                                  lambda name, phase: SamplingParams(temperature=0.7), "move")(queries)
    for q, got in zip(queries, probs, strict=True):
        # rel 3e-5: the scorer runs the rules prefix apart (hf_prefix.prefill), which rounds these peaked
        # logits' last float32 bits differently (3.8e-6 nats measured; identical in float64).
        assert got == approx32(reference_probs(tiny_policy, q, 0.7), scale=LOGITS)
