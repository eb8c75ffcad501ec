"""Choosing a reply among given texts by the model's own likelihood: the policy the exact evaluation scores, played.

A :class:`~arena.policies.base.Request` with ``choices`` (texts ``a_1..a_k``: a game's legal action
names) is not generated freely. Each choice is scored teacher-forced as the WHOLE reply, its tokens
``action_ids(a_i) = tokenize(a_i) + [eos]``::

    l_i = sum_t log pi_T(token_t | prompt, tokens_<t)        (policy.score, the sampling transform at T)
                                                              (the hf backend scores all rows of a call batched)
    P(i) = softmax(l)_i = exp(l_i) / sum_j exp(l_j)           (normalise)

and index ``i`` is drawn with probability ``P(i)``: ``u`` is the first draw of
``numpy.random.default_rng(seed)``, ``i`` the first index with ``u < P(1) + ... + P(i)``. ``seed`` is
the request's own (the backend hashes it, :func:`arena.policies.hf.row_seeds`), so a seeded request
chooses the same reply whichever requests share its batch. These are the functions
arena/loop/exact.py computes a model's action probabilities with, so the exact exploitability of the
seats' policies is the exploitability of the policy that plays. Every temperature draws, 0 included
(scored untempered, as :func:`~arena.policies.hf.sampling_logprobs` scores greedy): the exact
evaluation scores ``softmax(l)``, never its argmax. With ``top_p < 1`` a choice whose token falls
outside the nucleus has ``l_i = -inf`` and is never drawn; when every choice does, the request fails
with one line (nothing to normalise).

The completion is the chosen text: ``completion_ids = action_ids(a_i)``, ``alternatives`` the other
choices' ``action_ids`` (in order), ``finish_reason="stop"``, and ``logprobs`` its per-token
``log pi_T`` as scored, except the last, which also carries the normaliser::

    logprobs[-1] = log pi_T(last token) - logsumexp_j l_j,    so  sum(logprobs) = log P(i).

The learner does the same (:func:`arena.learners.losses.normalise_choices`): it scores the
alternatives in the same forward pass, with gradient, and subtracts ``logsumexp_j l_j`` at the chosen
reply's last token. The loss then sees the policy that plays: at one update per batch the
policy-gradient term of a sample is ``-A * grad log P(i) = -A * (grad l_i - sum_j P(j) grad l_j)``,
which raises the chosen action's share and lowers the others' rather than raising ``l_i`` alone
(an earlier version did that: the mass on the legal names fell from 1.25e-5 to 2.2e-9 in one
Kuhn step while exploitability did not improve). The per-token ratio learner/generator is 1 at
equal weights, as for a generated reply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.policies.base import Completion, Request


def normalise(logps: Sequence[float]) -> list[float]:
    """``softmax``: ``exp(l_i - m) / sum_j exp(l_j - m)`` with ``m = max l`` (stable)."""
    m = max(logps)
    e = [math.exp(x - m) for x in logps]
    total = sum(e)
    return [x / total for x in e]


def action_ids(tokenizer: Any, text: str) -> list[int]:
    """The tokens of ``text`` as a whole reply: its own tokens, then end of sequence."""
    return list(tokenizer.encode(text, add_special_tokens=False)) + [int(tokenizer.eos_token_id)]


def draw(probs: Sequence[float], seed: int) -> int:
    """Index ``i`` with probability ``probs[i]``: the first ``i`` with ``u < probs[0] + ... + probs[i]``,
    ``u`` the first draw of ``numpy.random.default_rng(seed)`` (the last index if rounding leaves ``u`` above
    the total)."""
    u = float(np.random.default_rng(seed).random())
    total = 0.0
    for i, p in enumerate(probs):
        total += p
        if u < total:
            return i
    return max(i for i, p in enumerate(probs) if p > 0)


def choose(request: Request, prompt_ids: list[int], ids: list[list[int]], scored: list[list[float]],
           seed: int) -> Completion:
    """Draw one of ``request.choices`` (tokens ``ids``, ``action_ids`` of each) by its scores after
    ``prompt_ids``: ``scored[i]`` is choice ``i``'s per-token ``log pi_T`` (``policy.score``, or the hf
    backend's batched ``score_rows``, equal to it up to float32 rounding), ``l_i = sum(scored[i])``
    (module docstring)."""
    choices = request.choices or []
    if not choices:
        raise ValueError("a request with choices needs at least one (got an empty list)")
    logps = [sum(s) for s in scored]
    if max(logps) == -math.inf:
        raise ValueError(f"every choice has probability 0 under top_p={request.params.top_p} (choices: "
                         f"{', '.join(choices[:12])}); raise top_p")
    i = draw(normalise(logps), seed)
    top = max(logps)
    lse = top + math.log(sum(math.exp(x - top) for x in logps))
    logprobs = [*scored[i][:-1], scored[i][-1] - lse]  # sums to log P(i)
    return Completion(text=choices[i], prompt_ids=list(prompt_ids), completion_ids=ids[i], logprobs=logprobs,
                      finish_reason="stop", alternatives=[c for j, c in enumerate(ids) if j != i])


def refuse_choices(requests: Sequence[Request], backend: str) -> None:
    """A backend that cannot score choices fails on a request with them (one line) rather than generating freely
    a reply the exact evaluation does not describe; the config check refuses it first, at start-up."""
    if any(r.choices is not None for r in requests):
        raise ValueError(f"backend {backend} cannot choose among a request's choices (a game's action_mode: score); "
                         "use backend hf")
