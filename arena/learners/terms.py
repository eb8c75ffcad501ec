"""The objective terms' side of a learner step (``learner.objectives``, arena/learners/objectives.py): the
probes they read, the advantages they reweight before the update, and their statistics after it.

:class:`ObjectiveTerms` is a base of :class:`arena.learners.update.Learner` (beside
:class:`~arena.learners.passes.ModelPasses`, whose passes it runs); it reads the learner's ``objectives``
and ``dist``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from arena.core.distributed import Dist, sum_tensor
from arena.core.types import Sample
from arena.learners.batch import MicroBatch, collate
from arena.learners.config import ObjectiveConfig
from arena.learners.objectives import Objective, ProbeDist, get_objective
from arena.learners.passes import ModelPasses
from arena.learners.progress import Progress


def probe_topk(terms: Sequence[Any]) -> dict[str, int]:
    """Probe name -> how many top tokens to keep (the most any term asks; 0, the full vocabulary, wins)."""
    need: dict[str, int] = {}
    for term in terms:
        for name in term.probes:
            cur = need.get(name)
            need[name] = 0 if term.topk == 0 or cur == 0 else max(cur or 0, term.topk)
    return need


def build_objectives(cfgs: Sequence[ObjectiveConfig]) -> list[tuple[str, Objective]]:
    """``(stat key, term)`` per configured objective; a repeated name gets ``#2``, ``#3``, ..."""
    out: list[tuple[str, Objective]] = []
    seen: dict[str, int] = {}
    for c in cfgs:
        spec = get_objective(c.name)
        seen[c.name] = seen.get(c.name, 0) + 1
        key = f"obj/{c.name}" + (f"#{seen[c.name]}" if seen[c.name] > 1 else "")
        coef = spec.cls.default_coef if c.coef is None else c.coef
        out.append((key, spec.cls(spec.options.model_validate(c.options), coef)))
    return out


class ObjectiveTerms(ModelPasses):
    """Probes, reweighting and statistics of the learner's objective terms."""

    objectives: list[tuple[str, Objective]]
    dist: Dist

    def _probe_dists(self, samples: Sequence[Sample], mb: MicroBatch, need: dict[str, int]) -> dict[str, ProbeDist]:
        """No-grad distributions of each needed probe over ``mb``'s completion tokens.

        Rows without the probe are scored on their own prompt (one batched pass) and
        flagged absent; a micro-batch where no row has the probe skips the pass. The
        token budget counts the samples' own prompts, not the (often longer) probe prompts.
        """
        out: dict[str, ProbeDist] = {}
        for name, k in need.items():
            present = [name in samples[i].probes for i in mb.index]
            if not any(present):
                continue
            rows = [
                samples[i].model_copy(update={"prompt_ids": samples[i].probes[name]}) if name in samples[i].probes
                else samples[i]
                for i in mb.index
            ]
            mb_rows = collate(rows, list(range(len(rows))), self.pad_id, self.device, self.cfg.share_prefix_min_tokens)
            logp = self._log_softmax(self._forward_model(), mb_rows)
            flags = torch.tensor(present, device=self.device)
            if k == 0:
                out[name] = ProbeDist(None, logp, None, flags)
                continue
            top = logp.topk(min(k, logp.shape[-1] - 1), dim=-1)  # leave a non-empty tail bin
            tail = logp.scatter(-1, top.indices, float("-inf")).logsumexp(-1)
            out[name] = ProbeDist(top.indices, top.values, tail, flags)
        return out

    def _term_stats(
        self, samples: Sequence[Sample], kept: dict[str, torch.Tensor], reweighted: dict[str, dict[str, torch.Tensor]],
        progress: Progress | None,
    ) -> dict[str, float]:
        """Every term's :meth:`~arena.learners.objectives.Objective.step_stats` from its records over the
        whole batch (each sample's mean over the epochs it was recorded in; ranks summed first,
        so a mean over samples is over all of them, once); per-sample values go into ``extras``."""
        out: dict[str, float] = {}
        for key, term in self.objectives:
            records = dict(reweighted.get(key, {}))
            if key in kept:
                sums, counts = sum_tensor(self.dist, kept[key])  # a collective: every rank, every step
                mean = torch.where(counts > 0, sums / counts.clamp(min=1.0), torch.full_like(sums, float("nan")))
                records |= {name: mean[j] for j, name in enumerate(term.records)}
            stats, per_sample = term.step_stats(samples, records, progress)
            out |= stats
            for name, values in per_sample.items():
                for i, v in enumerate(values.tolist()):
                    if not math.isnan(v):
                        samples[i].extras[name] = v
        return out

    def _reweight(
        self, samples: Sequence[Sample], micro: list[MicroBatch], probes: list[dict[str, ProbeDist]], progress: Progress | None
    ) -> tuple[dict[str, float], dict[str, dict[str, torch.Tensor]]]:
        """Terms with ``reweights`` scale each sample's advantage (its token weights) before the update.
        Returns the stats and, per term, its ``value`` and ``weight`` vectors (whole batch)."""
        terms = [(key, term) for key, term in self.objectives if term.reweights_at(progress)]
        if not terms:
            return {}, {}
        values = {key: torch.zeros(len(samples), dtype=torch.float64) for key, _ in terms}
        lazy = probe_topk([term for _, term in terms if not term.loss_probes])
        for mb, mb_probes in zip(micro, probes, strict=True):
            mb_probes = {**mb_probes, **self._probe_dists(samples, mb, lazy)} if lazy else mb_probes
            logp = self._log_softmax(self._forward_model(), mb)  # the student's own context, no grad
            for key, term in terms:
                values[key][mb.index] = term.action_values(mb, logp, mb_probes).double().cpu()
        stats: dict[str, float] = {}
        records: dict[str, dict[str, torch.Tensor]] = {}
        for key, term in terms:
            values[key] = sum_tensor(self.dist, values[key])  # each row is one rank's, zero elsewhere
            w = term.action_weights(samples, values[key], progress)  # (N,)
            for mb in micro:
                mb.token_weights = mb.token_weights * w[mb.index].to(mb.token_weights)[:, None]
            # value_mean: over the samples with a value (a term gives NaN to rows it cannot value).
            stats |= {f"{key}/value_mean": float(values[key].nanmean()), f"{key}/weight_min": float(w.min()),
                      f"{key}/weight_max": float(w.max()), f"{key}/weight_mean": float(w.mean())}
            records[key] = {"value": values[key], "weight": w.double()}
        return stats, records


def keep_records(kept: torch.Tensor, names: Sequence[str], record: Mapping[str, torch.Tensor], index: Sequence[int]) -> None:
    """Add a micro-batch's records (name -> ``(b,)``, NaN: none) to ``kept`` ``(2, names, N)``: the
    sums and the counts of each sample's values, at the micro-batch's rows ``index``."""
    rows = torch.as_tensor(list(index), dtype=torch.long)
    for j, name in enumerate(names):
        if name not in record:
            continue
        v = record[name].detach().double().cpu()
        ok = ~v.isnan()
        kept[0, j].index_add_(0, rows, v.nan_to_num(0.0))
        kept[1, j].index_add_(0, rows, ok.double())
