"""The update step on the shared policy: micro-batches by token budget, accumulation, clipping.

``Learner.step(samples, progress)`` runs ``updates_per_batch`` optimizer steps on one batch:

1. pack samples into micro-batches whose padded size fits ``token_budget`` (with
   ``share_prompt_prefix``, samples whose prompts open alike together, their common prefix run
   once in every pass below: arena/learners/prefix.py);
2. take the "old" log-probabilities from the current weights (a separate no-grad
   pass only when ``updates_per_batch > 1``; otherwise the training forward's own,
   detached), the reference log-probabilities when ``beta > 0``, and the probe
   distributions the objective terms ask for; the mean absolute gap between the
   generator's sampling logprobs and the learner's is reported (stale weights or
   a broken sync show up there first);
3. for each micro-batch: per-token loss (clipped surrogate or detached REINFORCE
   on ``A_b * token_weight_bt``, plus ``beta`` * KL), times the sample's
   ``weight``, weighted so that the sum over micro-batches equals the loss over
   the whole batch (one mean over all of it, or with ``aggregate_per_phase`` one
   per phase, summed), plus the objective terms; backward; then clip gradients and step.

With ``learner.lora`` the model is wrapped in LoRA adapters (arena/learners/lora.py) and only they
are trained: the optimizer (and DeepSpeed's engine) holds the adapters' weights alone.

``backend: torch`` uses AdamW; ``backend: deepspeed`` builds a DeepSpeed engine
(ZeRO 0-3, optional bf16) that runs on GPUs and on CPU with gloo. Log-probs use
the sampling temperature, like the generator's.

Several ranks (arena/core/distributed.py): every rank is given the WHOLE step's samples and
``local``, the indices of its own; it packs and trains only those, while every
normalisation (tokens, sequences, the longest completion, objective totals, reweighting
values) is over all of them, so the ranks' gradients sum to the one-rank gradient:
``sum_grads`` all-reduces them (torch), DeepSpeed averages its own after the loss is
scaled by the world size. Per-micro-batch statistics are summed over ranks the same way.
Objective terms' per-sample records (``Objective.records``) are gathered whole, each row
from its own rank, before the terms compute their step statistics from them
(``Objective.step_stats``): a mean over samples is taken once, over all of them, never a
mean of per-rank or per-micro-batch means. Their per-sample values (AUSO's ``auso_jsd`` and
``auso_weight``) are written into the samples' ``extras``, which the episode log saves.
ZeRO-2 reduces inside each backward, so a rank with fewer micro-batches adds zero-loss
backwards until every rank has run as many (ZeRO-3 also gathers weights in each forward:
arena.train refuses it with several ranks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from arena.core.distributed import SINGLE, Dist, max_value, sum_grads, sum_tensor, sum_values
from arena.core.types import Sample
from arena.learners.batch import MicroBatch, choice_budget, collate, completion_log_softmax, completion_logprobs, pack  # noqa: F401
from arena.learners.clip import clipped_step
from arena.learners.config import LearnerConfig, ObjectiveConfig
from arena.learners.lora import apply_lora, is_lora
from arena.learners.losses import (
    aggregation_weights, choice_entropy, clipped_surrogate, importance_weights, kl_penalty, normalise_choices,
    phase_aggregation_weights, reinforce_detached,
)
from arena.learners.objectives import BatchTotals, Objective, ObjectiveContext, ProbeDist, get_objective
from arena.learners.progress import Progress, scheduled_lr, set_lr
from arena.learners.weights import rounded_weights


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


class Learner:
    """Updates ``model`` in place from batches of :class:`~arena.core.types.Sample`."""

    def __init__(
        self, model: Any, cfg: LearnerConfig, pad_id: int, temperature: float = 1.0, ref_model: Any | None = None,
        dist: Dist = SINGLE,
    ):
        self.cfg = cfg
        self.dist = dist
        self.model = model
        self.pad_id = pad_id
        self.temperature = temperature
        self.ref_model = ref_model
        self.version = 0  # optimizer steps taken: which weights a synced generator holds
        if cfg.beta > 0 and ref_model is None:
            raise ValueError("learner.beta > 0 needs the frozen reference model")
        if cfg.lora is not None and not is_lora(model):  # adapters only: the base weights are frozen
            model = apply_lora(model, cfg.lora)
        self.model = model
        self.device = next(model.parameters()).device
        self.objectives = build_objectives(cfg.objectives)
        self.probe_topk = probe_topk([term for _, term in self.objectives])
        model.train()
        self.master: list[torch.Tensor] | None = None
        if cfg.backend == "deepspeed":
            from arena.learners.ds import build_engine

            self.engine = build_engine(model, cfg)
            self.optimizer = self.engine.optimizer
        else:
            self.engine = None
            # bf16 weights (param_dtype): the model's own weights and gradients are bf16; AdamW steps an
            # fp32 master copy, so updates smaller than bf16's resolution still add up, and each step
            # rounds the master into the model. Gradients accumulate in fp32 across micro-batches.
            if cfg.param_dtype == "bfloat16":
                self.master = [p.detach().float().clone() for p in model.parameters() if p.requires_grad]
                model.to(torch.bfloat16)
            params = self.master if self.master is not None else self._trained()
            # The fused AdamW kernel is 3x faster than the per-tensor loop on this CPU (measured).
            self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)

    @property
    def module(self) -> Any:
        return self.engine.module if self.engine is not None else self.model

    def _forward_model(self) -> Any:
        return self.engine if self.engine is not None else self.model

    def _log_softmax(self, model: Any, mb: MicroBatch) -> torch.Tensor:
        enabled = self.cfg.autocast_bf16 and self.engine is None
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=enabled):
            return completion_log_softmax(model, mb, self.temperature, self.cfg.share_prompt_prefix)

    def _logprobs(self, model: Any, mb: MicroBatch) -> torch.Tensor:
        return self._log_softmax(model, mb).gather(-1, mb.completion_ids[..., None]).squeeze(-1)

    def _normalise_choices(self, model: Any, samples: Sequence[Sample], mb: MicroBatch, logp: torch.Tensor,
                           entropy: list[torch.Tensor] | None = None) -> torch.Tensor:
        """``logp`` (b, T) with each chosen reply's likelihood normalised over its sample's ``alternatives``
        (a reply chosen among a request's choices, arena/policies/choices.py): with ``l`` a reply's summed
        completion logprobs under ``model``, the row's last completion token gets
        ``- logsumexp(l_chosen, l_alt_1, ...)``, so the row sums to ``log P(chosen) = log softmax(l)_chosen``.
        An alternative that is itself a row of ``mb`` (the same prompt and completion: exact descent trains
        every legal action of a state, score-mode play often picks both at one state) takes that row's ``l``,
        gradient included; the others run in one more pass (with gradient when enabled). Rows without
        alternatives are unchanged; a micro-batch whose alternatives are all its own rows runs no extra pass.
        ``entropy``: a list that receives each row's :func:`~arena.learners.losses.choice_entropy` (with
        gradient), when the batch has choices."""
        where = {(tuple(samples[i].prompt_ids), tuple(samples[i].completion_ids)): r for r, i in enumerate(mb.index)}
        rows, owner, source = [], [], []  # source: the alternative's l in cat(the rows' l, the extra pass's)
        for r, i in enumerate(mb.index):
            for alt in samples[i].alternatives:
                owner.append(r)
                same = where.get((tuple(samples[i].prompt_ids), tuple(alt)))
                if same is not None:
                    source.append(same)
                    continue
                source.append(len(mb.index) + len(rows))
                rows.append(samples[i].model_copy(update={"completion_ids": list(alt), "logprobs": [], "alternatives": [],
                                                          "token_weights": None, "probes": {}}))
        if not owner:
            return logp
        own = (logp * mb.completion_mask).sum(-1)  # (b,) each row's l
        sums = own
        if rows:
            alt_mb = collate(rows, list(range(len(rows))), self.pad_id, self.device, self.cfg.share_prefix_min_tokens)
            alt_logp = self._log_softmax(model, alt_mb).gather(-1, alt_mb.completion_ids[..., None]).squeeze(-1)
            sums = torch.cat([own, (alt_logp * alt_mb.completion_mask).sum(-1)])
        alt_sums = sums[torch.tensor(source, device=sums.device)]  # (n_alt,)
        if entropy is not None:
            entropy.append(choice_entropy(own, alt_sums, owner))
        return normalise_choices(logp, mb.completion_mask, alt_sums, owner)

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

    def step(
        self, samples: Sequence[Sample], progress: Progress | None = None, local: Sequence[int] | None = None
    ) -> dict[str, float]:
        """One batch's updates. ``local``: the indices of this rank's samples (several ranks); None: all.
        With ``progress``, the optimizer's learning rate is ``learner.lr_schedule``'s at that point
        (:func:`~arena.learners.progress.scheduled_lr`), logged as ``lr`` when it is not constant."""
        if not samples:
            return {"samples": 0.0}
        cfg = self.cfg
        lr = cfg.lr
        if progress is not None and cfg.lr_schedule != "constant":
            lr = scheduled_lr(cfg.lr, cfg.lr_end, cfg.lr_schedule, progress.fraction)
            set_lr(self, lr)
        # Rows with a common prompt prefix travel together; the training, old-logprob, reference and
        # probe passes all run it once per micro-batch (arena/learners/batch.py, prefix.py).
        # A chosen reply's alternatives run beside its micro-batch: the budget counts them (choice_budget).
        share, min_saved = cfg.share_prompt_prefix, cfg.share_prefix_min_tokens
        budget = choice_budget(samples, cfg.token_budget)
        if local is None:
            groups = pack(samples, budget, share, min_saved)
        else:
            mine = [samples[i] for i in local]
            groups = [[local[i] for i in g] for g in pack(mine, budget, share, min_saved)]
        micro = [collate(samples, g, self.pad_id, self.device, min_saved) for g in groups]
        n_tokens = float(sum(len(s.completion_ids) for s in samples))
        n_seqs = len(samples)
        constant = float(max(len(s.completion_ids) for s in samples))
        phase_tokens: dict[str, float] = {}
        phase_seqs: dict[str, int] = {}
        for s in samples:  # per-phase totals over the WHOLE batch (aggregate_per_phase)
            phase_tokens[s.phase] = phase_tokens.get(s.phase, 0.0) + len(s.completion_ids)
            phase_seqs[s.phase] = phase_seqs.get(s.phase, 0) + 1
        # Only the probes of terms active at this step are scored (AUSO's stages use one each); those only
        # the reweighting pass reads (``loss_probes`` False) are scored there, a micro-batch at a time.
        active = [term for _, term in self.objectives if term.active_at(progress)]
        need = probe_topk([term for term in active if term.loss_probes])
        totals = BatchTotals(n_seqs, n_tokens, {p: sum(p in s.probes for s in samples) for p in probe_topk(active)})
        with torch.no_grad():
            # One update per batch is on-policy: the "old" logprobs are the current ones,
            # taken (detached) from the training forward itself; no extra pass needed.
            old: list[torch.Tensor | None] = [None] * len(micro)
            if cfg.updates_per_batch > 1:
                old = [self._normalise_choices(self._forward_model(), samples, mb, self._logprobs(self._forward_model(), mb))
                       for mb in micro]
            ref = ([self._normalise_choices(self.ref_model, samples, mb, self._logprobs(self.ref_model, mb)) for mb in micro]
                   if cfg.beta > 0 else None)
            # Probes are scored once, by the weights before this step's updates.
            probes = [self._probe_dists(samples, mb, need) for mb in micro]
            reweight_stats, reweight_records = self._reweight(samples, micro, probes, progress)
        # Each term's per-sample records: (sums, counts) x names x samples, summed over epochs and ranks.
        kept = {key: torch.zeros(2, len(term.records), n_seqs, dtype=torch.float64)
                for key, term in self.objectives if term.records}
        stats = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0} | {key: 0.0 for key, _ in self.objectives}
        n_choices = float(sum(bool(s.alternatives) for s in samples))  # chosen replies: the bonus's mean
        if cfg.choice_entropy > 0 and n_choices:
            stats["choice_entropy"] = 0.0
        gap_sum, gap_count = 0.0, 0.0
        is_sums, is_max = torch.zeros(3, dtype=torch.float64), 0.0  # sum rho, sum w, tokens over the cap (epoch 0)
        grad_norm = 0.0
        # ZeRO-2 reduces gradients inside every backward, so every rank must run as many.
        backwards = int(max_value(self.dist, len(micro))) if self.engine is not None and self.dist.active else 0
        for epoch in range(cfg.updates_per_batch):
            for k, mb in enumerate(micro):
                logp_full = self._log_softmax(self._forward_model(), mb)  # (b, T, V)
                logp = logp_full.gather(-1, mb.completion_ids[..., None]).squeeze(-1)
                entropy: list[torch.Tensor] | None = [] if cfg.choice_entropy > 0 else None
                logp = self._normalise_choices(self._forward_model(), samples, mb, logp, entropy)
                if old[k] is None:
                    old[k] = logp.detach()
                if epoch == 0:  # generator vs learner, same tokens, before any update
                    seen = (~mb.gen_logprobs.isnan()).float() * mb.completion_mask
                    gap_sum += float(((mb.gen_logprobs - old[k]).abs() * seen).nan_to_num(0.0).sum())
                    gap_count += float(seen.sum())
                adv = mb.advantages[:, None] * mb.token_weights  # (b, T); exact when the weights are 1
                if cfg.loss == "clipped":
                    pg = clipped_surrogate(logp, old[k], adv, cfg.clip_low, cfg.clip_high)  # type: ignore[arg-type]
                else:
                    pg = reinforce_detached(logp, adv)
                is_w, rho = importance_weights(old[k], mb.gen_logprobs, cfg.importance.mode, cfg.importance.cap)  # type: ignore[arg-type]
                pg = pg * is_w
                if epoch == 0:
                    is_sums += torch.stack([(rho * seen).sum(), (is_w * seen).sum(), ((rho > cfg.importance.cap).float() * seen).sum()]).double()
                    is_max = max(is_max, float((rho * seen).max()) if seen.any() else 0.0)
                per_token = pg
                kl = torch.zeros_like(logp)
                if ref is not None:
                    kl = kl_penalty(logp, ref[k], cfg.kl_estimator)
                    per_token = pg + cfg.beta * kl
                per_token = per_token * mb.weights[:, None]
                if cfg.aggregate_per_phase:
                    w = phase_aggregation_weights(mb.completion_mask, cfg.aggregation, [samples[i].phase for i in mb.index],
                                                  phase_tokens, phase_seqs, constant)
                else:
                    w = aggregation_weights(mb.completion_mask, cfg.aggregation, n_tokens, n_seqs, constant)
                loss = (per_token * w).sum()
                if entropy:  # the bonus: -coef x the mean entropy over the whole batch's chosen replies
                    bonus = entropy[0].sum() / n_choices
                    loss = loss - cfg.choice_entropy * bonus
                    stats["choice_entropy"] += float(bonus.detach()) / cfg.updates_per_batch
                if self.objectives:
                    ctx = ObjectiveContext(mb, logp_full, probes[k], mb.weights, progress, totals, samples)
                    for key, term in self.objectives:
                        value = term.loss(ctx)
                        loss = loss + value
                        stats[key] += float(value.detach()) / cfg.updates_per_batch
                        if ctx.record:
                            _keep(kept[key], term.records, ctx.record, mb.index)
                            ctx.record.clear()
                self._backward(loss)
                with torch.no_grad():
                    tok_w = mb.completion_mask / n_tokens
                    ratio = torch.exp(logp - old[k])  # type: ignore[operator]
                    clipped = ((ratio < 1 - cfg.clip_low) | (ratio > 1 + cfg.clip_high)).float()
                    stats["loss"] += float(loss) / cfg.updates_per_batch
                    stats["pg_loss"] += float((pg * mb.weights[:, None] * w).sum()) / cfg.updates_per_batch
                    stats["kl"] += float((kl * tok_w).sum()) / cfg.updates_per_batch
                    stats["clip_frac"] += float((clipped * tok_w).sum()) / cfg.updates_per_batch
            for _ in range(backwards - len(micro)):  # this rank has fewer micro-batches: add zeros
                self._backward(sum(p.sum() for p in self.module.parameters() if p.requires_grad) * 0.0)
            grad_norm = self._optimizer_step()
        is_parts = {"is_rho": float(is_sums[0]), "is_w": float(is_sums[1]), "is_cut": float(is_sums[2])}
        sums = sum_values(self.dist, {**stats, **is_parts, "gap_sum": gap_sum, "gap_count": gap_count,
                                      "micro": float(len(micro))})
        gap_sum, gap_count = sums.pop("gap_sum"), sums.pop("gap_count")
        is_rho, is_w_sum, is_cut = sums.pop("is_rho"), sums.pop("is_w"), sums.pop("is_cut")
        n_micro = sums.pop("micro")
        stats = sums
        stats.update(reweight_stats)
        stats.update(self._term_stats(samples, kept, reweight_records, progress))
        stats.update(
            grad_norm=grad_norm,
            samples=float(n_seqs),
            tokens=n_tokens,
            micro_batches=n_micro,
            adv_mean=float(torch.tensor([s.advantage for s in samples]).mean()),
            logprob_gap=gap_sum / gap_count if gap_count else float("nan"),
        )
        if cfg.lr_schedule != "constant":
            stats["lr"] = lr
        if gap_count:  # the per-token ratio learner/generator over tokens with a generator logprob (this rank's max)
            stats.update({"is/ratio_mean": is_rho / gap_count, "is/weight_mean": is_w_sum / gap_count,
                          "is/over_cap_frac": is_cut / gap_count, "is/ratio_max": is_max})
        return stats

    @torch.no_grad()
    def score(self, samples: Sequence[Sample], temperature: float = 1.0, weights_dtype: str | None = None) -> list[list[float]]:
        """Teacher-forced logprobs of each sample's completion under the current weights (no autocast;
        bf16 numerics with bf16 weights) at ``temperature``: the learner's side of the weight-sync canary.

        ``weights_dtype`` (e.g. a bf16 generator's ``"bfloat16"``): score with every weight first rounded
        to that dtype, as a correct sync leaves them in the generator, then restored bit for bit. An fp32
        update smaller than half a bf16 step rounds away in the generator, so the unrounded learner is not
        what a correct sync can deliver (arena/canary.py)."""
        mb = collate(samples, list(range(len(samples))), self.pad_id, self.device)
        with rounded_weights(self.module, weights_dtype):
            logp = completion_logprobs(self._forward_model(), mb, temperature)
        return [logp[r, : len(s.completion_ids)].tolist() for r, s in enumerate(samples)]

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

    def _backward(self, loss: torch.Tensor) -> None:
        if self.engine is not None:  # DeepSpeed averages the ranks' gradients; ours must sum
            self.engine.backward(loss * self.dist.world if self.dist.active else loss, scale_wrt_gas=False)
        else:
            loss.backward()
            if self.master is not None:  # bf16 weights: move this micro-batch's gradient into fp32
                with torch.no_grad():
                    for m, p in zip(self.master, self._trained(), strict=True):
                        if p.grad is not None:
                            m.grad = p.grad.float() if m.grad is None else m.grad.add_(p.grad)
                            p.grad = None

    def _trained(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def _optimizer_step(self) -> float:
        self.version += 1  # the weights change: a generator that holds them needs a push (Trainer.sync_weights)
        if self.engine is not None:
            self.engine.step()
            torch.autograd.graph.increment_version(self._trained())
            norm = self.engine.get_global_grad_norm()
            return float(norm) if norm is not None else float("nan")
        params = self.master if self.master is not None else self._trained()
        sum_grads(self.dist, params)
        norm = self._clipped_step(params)
        # The fused AdamW kernel writes the weights without bumping their version counters; a generator that keys
        # what it keeps on them (HFPolicy's prefix memo, arena/policies/hf_prefix.py) must see the change.
        torch.autograd.graph.increment_version(self._trained())
        self.optimizer.zero_grad(set_to_none=True)
        if self.master is not None:
            with torch.no_grad():
                for m, p in zip(self.master, self._trained(), strict=True):
                    p.copy_(m)  # round to bf16
        return float(norm)

    def _clipped_step(self, params: list[torch.Tensor]) -> torch.Tensor:
        return clipped_step(self.optimizer, params, self.cfg.grad_clip)

    @property
    def partitioned(self) -> bool:
        """The optimizer state is split over the ranks (DeepSpeed ZeRO 1-3): each rank's differs."""
        return self.engine is not None and self.engine.zero_optimization_stage() > 0

    def state_dict(self) -> dict[str, Any]:
        """The optimizer state (this rank's partition under ZeRO); with bf16 weights also the fp32
        master weights, which the checkpoint's bf16 model does not hold (exact resume needs them)."""
        out: dict[str, Any] = {"optimizer": self.optimizer.state_dict()}
        if self.master is not None:
            out["master"] = [m.detach().clone() for m in self.master]
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """``state["optimizer"]``: a state dict, or under ZeRO the list of every saved rank's
        partition (which ZeRO's loader takes whole, then picks or re-splits its own)."""
        saved = state["optimizer"]
        if self.partitioned:
            self.optimizer.load_state_dict(saved if isinstance(saved, list) else [saved])
        else:
            self.optimizer.load_state_dict(saved)
        if self.master is not None:
            with torch.no_grad():
                # A checkpoint of fp32 weights has no master: the model's loaded weights are the start.
                saved_master = state.get("master") or [p.detach().float() for p in self._trained()]
                for m, p, v in zip(self.master, self._trained(), saved_master, strict=True):
                    m.copy_(v)
                    p.copy_(v)


def _keep(kept: torch.Tensor, names: Sequence[str], record: Mapping[str, torch.Tensor], index: Sequence[int]) -> None:
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
