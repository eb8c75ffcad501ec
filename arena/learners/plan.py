"""One learner step's layout and its running sums: :class:`StepPlan` (the micro-batches and the totals
every normalisation reads, over the WHOLE batch), :class:`Before` (what the no-grad passes before the
update give) and :class:`Tally` (the statistics summed over micro-batches and epochs, then over ranks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from arena.core.distributed import Dist, sum_values
from arena.core.types import Sample
from arena.learners.batch import MicroBatch, choice_budget, collate, pack
from arena.learners.losses import aggregation_weights, phase_aggregation_weights
from arena.learners.objectives import ProbeDist
from arena.learners.passes import Scored


@dataclass
class StepPlan:
    """The step's micro-batches (this rank's) and its totals over every rank's samples."""

    samples: Sequence[Sample]
    micro: list[MicroBatch]
    n_tokens: float  # completion tokens
    n_seqs: int
    constant: float  # the longest completion (Dr.GRPO's constant)
    phase_tokens: dict[str, float]
    phase_seqs: dict[str, int]
    n_choices: float  # chosen replies (rows with alternatives): the mean of the score-mode terms
    n_skipped: int = 0  # this rank's inert rows, in no micro-batch (plan_step's skip_inert)

    def aggregation(self, mb: MicroBatch, cfg: Any) -> torch.Tensor:
        """``(b, T)`` per-token weights whose sum over the step's micro-batches is ``learner.aggregation``'s
        reduction of the whole batch (per phase with ``aggregate_per_phase``)."""
        if cfg.aggregate_per_phase:
            return phase_aggregation_weights(mb.completion_mask, cfg.aggregation, [self.samples[i].phase for i in mb.index],
                                             self.phase_tokens, self.phase_seqs, self.constant)
        return aggregation_weights(mb.completion_mask, cfg.aggregation, self.n_tokens, self.n_seqs, self.constant)

    def is_choice(self, mb: MicroBatch) -> torch.Tensor:
        """``(b,) bool``: the rows that are chosen replies (their sample has alternatives)."""
        return torch.tensor([bool(self.samples[i].alternatives) for i in mb.index], device=mb.completion_mask.device)


def inert(sample: Sample) -> bool:
    """Whether ``sample``'s policy-gradient term is 0 at every token, in every epoch: advantage 0 (the
    clipped surrogate and REINFORCE are both ``A`` times a finite factor) or weight 0."""
    return sample.advantage == 0 or sample.weight == 0


def plan_step(samples: Sequence[Sample], cfg: Any, local: Sequence[int] | None, pad_id: int,
              device: torch.device, skip_inert: bool = False) -> StepPlan:
    """Pack this rank's samples (``local``; None: all) into micro-batches within ``learner.token_budget`` (a
    chosen reply's alternatives counted, :func:`~arena.learners.batch.choice_budget`; rows with a common prompt
    prefix together) and count the whole batch's totals. ``skip_inert`` (the learner's loss is the policy gradient
    alone): the :func:`inert` rows are packed into no micro-batch, since their gradient is 0, while the totals
    still count them, so every other row's weight and the summed gradient are unchanged. If every row of this
    rank is inert they all run: each weight then still gets its (zero) gradient and the optimizer steps as it did."""
    share, min_saved = cfg.share_prompt_prefix, cfg.share_prefix_min_tokens
    budget = choice_budget(samples, cfg.token_budget)
    rows = list(range(len(samples))) if local is None else list(local)
    live = [i for i in rows if not inert(samples[i])] if skip_inert else rows
    skipped = len(rows) - len(live) if live else 0
    rows = live or rows
    groups = [[rows[i] for i in g] for g in pack([samples[i] for i in rows], budget, share, min_saved)]
    phase_tokens: dict[str, float] = {}
    phase_seqs: dict[str, int] = {}
    for s in samples:  # per-phase totals over the WHOLE batch (aggregate_per_phase)
        phase_tokens[s.phase] = phase_tokens.get(s.phase, 0.0) + len(s.completion_ids)
        phase_seqs[s.phase] = phase_seqs.get(s.phase, 0) + 1
    return StepPlan(
        samples, [collate(samples, g, pad_id, device, min_saved) for g in groups],
        float(sum(len(s.completion_ids) for s in samples)), len(samples),
        float(max(len(s.completion_ids) for s in samples)), phase_tokens, phase_seqs,
        float(sum(bool(s.alternatives) for s in samples)), skipped,
    )


@dataclass
class Before:
    """What the passes before the update give, per micro-batch: the old policy's logprobs (None: taken from
    the first epoch's own forward), the reference's and the magnet's scores, the probes, and the objective
    terms' reweighting (stats and records)."""

    old: list[torch.Tensor | None]
    ref: list[torch.Tensor] | None
    magnet: list[Scored] | None
    magnet_coef: float
    probes: list[dict[str, ProbeDist]]
    reweight_stats: dict[str, float]
    reweight_records: dict[str, dict[str, torch.Tensor]]


@dataclass
class Tally:
    """Sums over a step's micro-batches and epochs: statistics (each epoch's share already divided by
    ``updates_per_batch``), the generator-learner gap and the importance ratios (first epoch only)."""

    stats: dict[str, float]
    gap_sum: float = 0.0
    gap_count: float = 0.0
    is_sums: torch.Tensor = field(default_factory=lambda: torch.zeros(3, dtype=torch.float64))  # sum rho, sum w, over cap
    is_max: float = 0.0

    def add(self, key: str, value: float) -> None:
        self.stats[key] = self.stats.get(key, 0.0) + value

    def first_epoch(self, mb: MicroBatch, old: torch.Tensor, rho: torch.Tensor, is_w: torch.Tensor, cap: float) -> None:
        """Generator vs learner on the same tokens, before any update: the logprob gap and the ratios."""
        seen = (~mb.gen_logprobs.isnan()).float() * mb.completion_mask
        self.gap_sum += float(((mb.gen_logprobs - old).abs() * seen).nan_to_num(0.0).sum())
        self.gap_count += float(seen.sum())
        self.is_sums += torch.stack([(rho * seen).sum(), (is_w * seen).sum(), ((rho > cap).float() * seen).sum()]).double().cpu()
        self.is_max = max(self.is_max, float((rho * seen).max()) if seen.any() else 0.0)

    def summed(self, dist: Dist, n_micro: int) -> tuple[dict[str, float], dict[str, float]]:
        """The statistics summed over ranks, and the step's derived ones: micro-batches, the logprob gap and the
        importance ratios (means over tokens with a generator logprob; the max is this rank's)."""
        is_parts = {"is_rho": float(self.is_sums[0]), "is_w": float(self.is_sums[1]), "is_cut": float(self.is_sums[2])}
        sums = sum_values(dist, {**self.stats, **is_parts, "gap_sum": self.gap_sum, "gap_count": self.gap_count,
                                 "micro": float(n_micro)})
        gap_sum, gap_count = sums.pop("gap_sum"), sums.pop("gap_count")
        is_rho, is_w_sum, is_cut = sums.pop("is_rho"), sums.pop("is_w"), sums.pop("is_cut")
        derived = {"micro_batches": sums.pop("micro"), "logprob_gap": gap_sum / gap_count if gap_count else float("nan")}
        if gap_count:
            derived |= {"is/ratio_mean": is_rho / gap_count, "is/weight_mean": is_w_sum / gap_count,
                        "is/over_cap_frac": is_cut / gap_count, "is/ratio_max": self.is_max}
        return sums, derived
