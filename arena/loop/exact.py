"""Action probabilities of configured policies, for games' exact metrics (``LLMGame.policy_metrics``).

For a query (a seat's prompt and the texts of its legal actions ``a_1..a_k``):

* a model policy (anything with ``encode`` and ``score``: the hf and vllm backends)
  scores each action as the WHOLE reply, teacher-forced: the completion tokens are
  ``tokenize(a_i) + [eos]``, ``l_i = sum_t log pi_T(token_t | prompt, tokens_<t)``
  under the policy's own sampling transform at the seat's sampling temperature
  ``T`` for the phase (``policy.score``, the path the learner's weight-sync canary
  uses). The action's probability is ``softmax(l)_i = exp(l_i) / sum_j exp(l_j)``:
  the model's probability of replying exactly ``a_i``, given that it replies with a
  legal action name. It is computed, never estimated from samples;
* a scripted policy whose bot has ``action_probs(observation)`` (the OpenSpiel bots)
  gives that distribution;
* anything else is refused with one line (its distribution is unknown).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from arena.core.errors import ConfigError
from arena.core.game_types import ActionProbs, ActionQuery
from arena.policies.base import Request, SamplingParams


def normalise(logps: Sequence[float]) -> list[float]:
    """``softmax``: ``exp(l_i - m) / sum_j exp(l_j - m)`` with ``m = max l`` (stable)."""
    m = max(logps)
    e = [math.exp(x - m) for x in logps]
    total = sum(e)
    return [x / total for x in e]


def action_ids(tokenizer: Any, text: str) -> list[int]:
    """The tokens of ``text`` as a whole reply: its own tokens, then end of sequence."""
    return list(tokenizer.encode(text, add_special_tokens=False)) + [int(tokenizer.eos_token_id)]


def model_action_probs(policy: Any, query: ActionQuery, params: SamplingParams) -> list[float]:
    """Teacher-forced probability of each action text under ``policy``, normalised over the actions."""
    prompt = policy.encode(Request(messages=query.messages, params=params, seat=query.seat))
    logps = [sum(policy.score(prompt, action_ids(policy.tokenizer, a), params)) for a in query.actions]
    return normalise(logps)


def policies_action_probs(
    policies: Mapping[str, Any], policy_for: Callable[[str], str], sampling: Callable[[str, str], SamplingParams],
    phase: str,
) -> ActionProbs:
    """An :data:`~arena.core.game_types.ActionProbs` over the run's policies: each query goes to its seat's policy."""

    def probs(queries: Sequence[ActionQuery]) -> list[list[float]]:
        out: list[list[float]] = []
        for q in queries:
            name = policy_for(q.seat)
            policy = policies[name]
            bot = getattr(policy, "bot", None)
            if bot is not None and hasattr(bot, "action_probs"):
                out.append(list(bot.action_probs(q.observation)))
            elif hasattr(policy, "score") and hasattr(policy, "encode") and hasattr(policy, "tokenizer"):
                out.append(model_action_probs(policy, q, sampling(name, phase)))
            else:
                raise ConfigError(f"policy {name!r} (seat {q.seat}) cannot give action probabilities: exact metrics "
                                  "need a model policy (hf, vllm) or a bot with action_probs (scripted:random, "
                                  "scripted:cfr)")
        return out

    return probs


def exact_metrics(game: Any, policies: Mapping[str, Any], policy_for: Callable[[str], str],
                  sampling: Callable[[str, str], SamplingParams]) -> dict[str, float]:
    """``game.policy_metrics`` with the policies' action probabilities; a one-line ConfigError when the game
    has none or refuses (too large to enumerate)."""
    phase = game.phases[0] if game.phases else ""
    try:
        values = game.policy_metrics(policies_action_probs(policies, policy_for, sampling, phase))
    except ValueError as e:
        raise ConfigError(" ".join(str(e).split())) from None
    if values is None:
        raise ConfigError(f"game {game.metadata['name']} has no exact metrics (LLMGame.policy_metrics); they exist "
                          "for OpenSpiel games (game.name: openspiel)")
    return values
