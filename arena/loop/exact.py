"""Action probabilities of configured policies, for games' exact metrics (``LLMGame.policy_metrics``).

For a query (a seat's prompt and the texts of its legal actions ``a_1..a_k``):

* a model policy (anything with ``encode`` and ``score``: the hf and vllm backends)
  scores each action as the WHOLE reply, teacher-forced: the completion tokens are
  ``tokenize(a_i) + [eos]``, ``l_i = sum_t log pi_T(token_t | prompt, tokens_<t)``
  under the policy's own sampling transform at the seat's sampling temperature
  ``T`` for the phase (``policy.score``, the path the learner's weight-sync canary
  uses). The action's probability is ``softmax(l)_i = exp(l_i) / sum_j exp(l_j)``:
  the model's probability of replying exactly ``a_i``, given that it replies with a
  legal action name. It is computed, never estimated from samples. ``exp(l_i)`` itself is
  the probability of the reply ``a_i``, so ``m = sum_i exp(l_i)`` is the model's mass on
  the exact legal replies: :meth:`SeatActionProbs.reply_logprobs` hands the ``l_i`` to a
  game that reports the policy actually played (a reply that names no legal action
  takes the game's fallback; arena/games/openspiel/exact.py ``played_policy``);
* a scripted policy whose bot has ``action_probs(observation)`` (the OpenSpiel bots)
  gives that distribution (its reply log-probabilities are ``log p_i``: a bot never
  replies with anything but a legal action, ``m = 1``);
* anything else is refused with one line (its distribution is unknown).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from arena.core.errors import ConfigError
from arena.core.game_types import ActionQuery
from arena.policies.base import Request, SamplingParams
from arena.policies.choices import action_ids, normalise  # shared with the policy that plays them (action_mode: score)


def model_reply_logprobs(policy: Any, query: ActionQuery, params: SamplingParams) -> list[float]:
    """``l_i``: the teacher-forced log-probability of each action text as the whole reply under ``policy``."""
    prompt = policy.encode(Request(messages=query.messages, params=params, seat=query.seat))
    return [sum(policy.score(prompt, action_ids(policy.tokenizer, a), params)) for a in query.actions]


#: Queries a backend with ``score_rows`` (hf) scores in one batch: their prompts' KV caches are held together.
SCORE_BATCH = 32


def batch_reply_logprobs(policy: Any, queries: Sequence[ActionQuery], params: SamplingParams) -> list[list[float]]:
    """:func:`model_reply_logprobs` of several queries through the backend's batched ``score_rows`` (each
    prompt prefilled once, every action scored on its KV cache): equal to it up to float32 rounding."""
    prompts, completions, counts = [], [], []
    for q in queries:
        prompt = policy.encode(Request(messages=q.messages, params=params, seat=q.seat))
        for a in q.actions:
            prompts.append(prompt)
            completions.append(action_ids(policy.tokenizer, a))
        counts.append(len(q.actions))
    scored = iter(policy.score_rows(prompts, completions, params))
    return [[sum(next(scored)) for _ in range(k)] for k in counts]


def model_action_probs(policy: Any, query: ActionQuery, params: SamplingParams) -> list[float]:
    """Teacher-forced probability of each action text under ``policy``, normalised over the actions."""
    return normalise(model_reply_logprobs(policy, query, params))


class SeatActionProbs:
    """An :data:`~arena.core.game_types.ActionProbs` over the run's policies (each query goes to its seat's
    policy), with the reply log-probabilities behind the normalised rows (:meth:`reply_logprobs`)."""

    def __init__(self, policies: Mapping[str, Any], policy_for: Callable[[str], str],
                 sampling: Callable[[str, str], SamplingParams], phase: str):
        self.policies, self.policy_for, self.sampling, self.phase = policies, policy_for, sampling, phase

    def reply_logprobs(self, queries: Sequence[ActionQuery]) -> list[list[float]]:
        """Per query, ``l_i = log P(reply == a_i)`` for each legal action text: a model's whole-reply
        log-likelihood (``sum_i exp(l_i) <= 1``, the rest is on replies that are no action text); a bot's
        ``log p_i`` (``-inf`` where ``p_i = 0``; the sum is 1)."""
        out: list[list[float] | None] = [None] * len(queries)
        batched: dict[str, list[int]] = {}  # policy name -> queries it scores in batches (score_rows)
        for qi, q in enumerate(queries):
            name = self.policy_for(q.seat)
            policy = self.policies[name]
            bot = getattr(policy, "bot", None)
            if bot is not None and hasattr(bot, "action_probs"):
                out[qi] = [math.log(p) if p > 0 else -math.inf for p in bot.action_probs(q.observation)]
            elif hasattr(policy, "score_rows") and hasattr(policy, "encode") and hasattr(policy, "tokenizer"):
                batched.setdefault(name, []).append(qi)
            elif hasattr(policy, "score") and hasattr(policy, "encode") and hasattr(policy, "tokenizer"):
                out[qi] = model_reply_logprobs(policy, q, self.sampling(name, self.phase))
            else:
                raise ConfigError(f"policy {name!r} (seat {q.seat}) cannot give action probabilities: exact metrics "
                                  "need a model policy (hf, vllm) or a bot with action_probs (scripted:random, "
                                  "scripted:cfr)")
        for name, todo in batched.items():
            for start in range(0, len(todo), SCORE_BATCH):
                chunk = todo[start:start + SCORE_BATCH]
                rows = batch_reply_logprobs(self.policies[name], [queries[i] for i in chunk], self.sampling(name, self.phase))
                for qi, row in zip(chunk, rows, strict=True):
                    out[qi] = row
        return [row for row in out if row is not None]

    def __call__(self, queries: Sequence[ActionQuery]) -> list[list[float]]:
        """``softmax(l)`` per query: the action probabilities given a legal reply."""
        return [normalise(row) for row in self.reply_logprobs(queries)]

    def sample_replies(self, queries: Sequence[ActionQuery], n: int, seed: int = 0) -> list[list[str]]:
        """``n`` replies per query, generated freely by its seat's policy at its sampling settings (request
        ``j`` of query ``q`` seeded ``seed + q * n + j``; one ``generate`` call per policy): what the seat
        would write there, for a Monte Carlo estimate of the policy it plays."""
        by_policy: dict[str, list[tuple[int, Request]]] = {}
        for qi, q in enumerate(queries):
            name = self.policy_for(q.seat)
            params = self.sampling(name, self.phase)
            by_policy.setdefault(name, []).extend(
                (qi, Request(messages=q.messages, params=params, seed=seed + qi * n + j, seat=q.seat,
                             observation=q.observation)) for j in range(n))
        out: list[list[str]] = [[] for _ in queries]
        for name, items in by_policy.items():
            completions = self.policies[name].generate([r for _, r in items])
            for (qi, _), c in zip(items, completions, strict=True):
                out[qi].append(c.text)
        return out


def policies_action_probs(
    policies: Mapping[str, Any], policy_for: Callable[[str], str], sampling: Callable[[str, str], SamplingParams],
    phase: str,
) -> SeatActionProbs:
    """A :class:`SeatActionProbs` over the run's policies: each query goes to its seat's policy."""
    return SeatActionProbs(policies, policy_for, sampling, phase)


@contextmanager
def current_policy(cfg: Any, env: Any, policies: Mapping[str, Any], sampling: Any) -> Iterator[SeatActionProbs]:
    """The first trainable policy at every seat, at its sampling settings for ``env``'s first phase, as
    ``ActionProbs`` for use inside the block (what ``scripted:br:current`` answers and ``train.descent``
    descends): no gradient, and the global RNGs saved and restored around it, so the step's games and
    updates are what they would be without the scoring."""
    import torch

    from arena.loop.checkpoint import rng_state, set_rng_state

    trainable = cfg.trainable
    phase = env.phases[0] if env.phases else ""
    saved = rng_state()
    try:
        with torch.no_grad():
            yield policies_action_probs(policies, lambda seat: trainable, sampling, phase)
    finally:
        set_rng_state(saved)


class Remembered:
    """An action-probability source that asks each query once: a second batch with queries already answered
    (the same seat, prompt and actions) is answered from memory, so two computations over one policy (its
    metrics, then its played table) score the model once."""

    def __init__(self, inner: SeatActionProbs):
        self.inner = inner
        self.memo: dict[Any, list[float]] = {}

    @staticmethod
    def key(q: ActionQuery) -> Any:
        return q.seat, repr(q.messages), tuple(q.actions)

    def reply_logprobs(self, queries: Sequence[ActionQuery]) -> list[list[float]]:
        todo = [q for q in queries if self.key(q) not in self.memo]
        if todo:
            for q, row in zip(todo, self.inner.reply_logprobs(todo), strict=True):
                self.memo[self.key(q)] = row
        return [list(self.memo[self.key(q)]) for q in queries]

    def __call__(self, queries: Sequence[ActionQuery]) -> list[list[float]]:
        return [normalise(row) for row in self.reply_logprobs(queries)]

    def sample_replies(self, queries: Sequence[ActionQuery], n: int, seed: int = 0) -> list[list[str]]:
        return self.inner.sample_replies(queries, n, seed)


def exact_metrics(game: Any, policies: Mapping[str, Any], policy_for: Callable[[str], str],
                  sampling: Callable[[str, str], SamplingParams], past: list[Any] | None = None) -> dict[str, float]:
    """``game.policy_metrics`` with the policies' action probabilities; a one-line ConfigError when the game
    has none or refuses (too large to enumerate). ``past``: the played tables of earlier evaluations of this
    run; when the game has them (``played_array`` and ``average_metrics``: OpenSpiel games), this policy's
    table is appended and the metrics of the average policy over ``past`` are added
    (``exploitability_average``, ``nash_conv_average``)."""
    phase = game.phases[0] if game.phases else ""
    probs = Remembered(policies_action_probs(policies, policy_for, sampling, phase))
    try:
        values = game.policy_metrics(probs)
        if values is not None and past is not None and hasattr(game, "played_array"):
            past.append(game.played_array(probs))
            values = values | game.average_metrics(past)
    except ValueError as e:
        raise ConfigError(" ".join(str(e).split())) from None
    if values is None:
        raise ConfigError(f"game {game.metadata['name']} has no exact metrics (LLMGame.policy_metrics); they exist "
                          "for OpenSpiel games (game.name: openspiel)")
    return values
