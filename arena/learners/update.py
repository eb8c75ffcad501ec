"""The update step on the shared policy: micro-batches by token budget, accumulation, clipping.

``Learner.step(samples, progress)`` runs ``updates_per_batch`` optimizer steps on one batch:

1. pack samples into micro-batches whose padded size fits ``token_budget`` (with
   ``share_prompt_prefix``, samples whose prompts open alike together, their common prefix run
   once in every pass below: arena/learners/prefix.py) (:func:`~arena.learners.plan.plan_step`);
2. the "old" log-probabilities are the first epoch's own forward, detached: every micro-batch of
   that epoch runs before its optimizer step, so they are those before the update, which every
   epoch's ratio and bound read (no pass of their own); before the update
   (:meth:`Learner._before_update`), take the reference log-probabilities when ``beta > 0``, the magnet's when
   ``learner.magnet`` is set (arena/learners/magnet.py), and the probe distributions the objective
   terms ask for; the mean absolute gap between the generator's sampling logprobs and the learner's
   is reported (stale weights or a broken sync show up there first);
3. for each micro-batch (:meth:`Learner._micro_step`): per-token loss (clipped surrogate or detached
   REINFORCE on ``A_b * token_weight_bt``, its push stopped where ``learner.bound`` says, plus
   ``beta`` * KL), times the sample's ``weight``, weighted so that the sum over micro-batches equals
   the loss over the whole batch (one mean over all of it, or with ``aggregate_per_phase`` one per
   phase, summed), plus the regularisers (entropy bonuses, the magnet's KL:
   :meth:`Learner._regularisers`) and the objective terms; backward; then clip gradients and step;
4. after the last optimizer step, the magnet moves (``previous``: reset, ``ema``: mixed).

With ``learner.lora`` the model is wrapped in LoRA adapters (arena/learners/lora.py) and only they
are trained: the optimizer (and DeepSpeed's engine) holds the adapters' weights alone.

``backend: torch`` uses AdamW; ``backend: deepspeed`` builds a DeepSpeed engine
(ZeRO 0-3, optional bf16) that runs on GPUs and on CPU with gloo. Log-probs use
the sampling temperature, like the generator's.

Several ranks (arena/core/distributed.py): every rank is given the WHOLE step's samples and
``local``, the indices of its own; it packs and trains only those, while every
normalisation (tokens, sequences, the longest completion, chosen replies, objective totals,
reweighting values) is over all of them, so the ranks' gradients sum to the one-rank gradient:
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

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

from arena.core.distributed import SINGLE, Dist, max_value, sum_grads
from arena.core.types import Sample
from arena.learners.batch import MicroBatch, collate, completion_log_softmax, completion_logprobs, pack  # noqa: F401
from arena.learners.clip import clipped_step
from arena.learners.config import LearnerConfig
from arena.learners.lora import apply_lora, is_lora
from arena.learners.losses import choice_entropy, clipped_surrogate, importance_weights, kl_penalty, reinforce_detached
from arena.learners.magnet import Magnet
from arena.learners.objectives import BatchTotals, Objective, ObjectiveContext
from arena.learners.passes import Choices
from arena.learners.plan import Before, StepPlan, Tally, plan_step
from arena.learners.progress import Progress, scheduled_lr, set_lr
from arena.learners.regularisers import bound_keep, choice_kl, decision_probabilities, token_entropy
from arena.learners.terms import ObjectiveTerms, build_objectives, keep_records, probe_topk  # noqa: F401
from arena.learners.whiten import whitened
from arena.learners.weights import rounded_weights


class Learner(ObjectiveTerms):
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
        self._updating = False  # in the update's loss.backward(): bf16 gradients go to the master (_grad_ready)
        # Called once a step's no-grad passes (reference, magnet, probes) are done, before its first gradient
        # (train.memory gives the reference's pages back there: arena/loop/components/memory.py).
        self.after_passes: list[Callable[[], Any]] = []
        if cfg.beta > 0 and ref_model is None:
            raise ValueError("learner.beta > 0 needs the frozen reference model")
        if cfg.lora is not None and not is_lora(model):  # adapters only: the base weights are frozen
            model = apply_lora(model, cfg.lora)
        self.model = model
        self.device = next(model.parameters()).device
        self.objectives: list[tuple[str, Objective]] = build_objectives(cfg.objectives)
        self.probe_topk = probe_topk([term for _, term in self.objectives])
        self.magnet = Magnet(cfg.magnet, ref_model) if cfg.magnet is not None else None
        self._sketcher: Any = None  # learner.whiten's count sketch (its signs drawn once)
        model.train()
        if cfg.activation_checkpointing:
            from arena.learners.recompute import checkpoint_layers

            checkpoint_layers(model)
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
                # In the update's own backward pass, each weight's bf16 gradient moves into its fp32 master's as
                # soon as backward has it, so the whole model's bf16 gradients are never held beside the fp32 ones
                # (issue #54); the same sums as moving them after backward (a weight's AccumulateGrad runs once
                # per backward). Other backward passes (learner.whiten's sketches) keep their .grad.
                self._master_hooks = [p.register_post_accumulate_grad_hook(partial(self._grad_ready, m))
                                      for m, p in zip(self.master, self._trained(), strict=True)]
            params = self.master if self.master is not None else self._trained()
            # The fused AdamW kernel is 3x faster than the per-tensor loop on this CPU (measured).
            self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)

    @property
    def module(self) -> Any:
        return self.engine.module if self.engine is not None else self.model

    def step(
        self, samples: Sequence[Sample], progress: Progress | None = None, local: Sequence[int] | None = None
    ) -> dict[str, float]:
        """One batch's updates. ``local``: the indices of this rank's samples (several ranks); None: all.
        With ``progress``, the optimizer's learning rate is ``learner.lr_schedule``'s at that point
        (:func:`~arena.learners.progress.scheduled_lr`), logged as ``lr`` when it is not constant, and the
        magnet's coefficient is its anneal's."""
        if not samples:
            return {"samples": 0.0}
        cfg = self.cfg
        lr = cfg.lr
        if progress is not None and cfg.lr_schedule != "constant":
            lr = scheduled_lr(cfg.lr, cfg.lr_end, cfg.lr_schedule, progress.fraction)
            set_lr(self, lr)
        whiten_stats: dict[str, float] = {}
        if cfg.whiten is not None:  # advantages through the model's kernel between decisions (arena/learners/whiten.py)
            samples, whiten_stats, self._sketcher = whitened(self.module, samples, cfg.whiten, self.temperature,
                                                             self._sketcher)
        plan = plan_step(samples, cfg, local, self.pad_id, self.device, self._skips_inert())
        if self.magnet is not None:
            self.magnet.start(self._weights())
        # Only the probes of terms active at this step are scored (AUSO's stages use one each); those only
        # the reweighting pass reads (``loss_probes`` False) are scored there, a micro-batch at a time.
        active = [term for _, term in self.objectives if term.active_at(progress)]
        totals = BatchTotals(plan.n_seqs, plan.n_tokens, {p: sum(p in s.probes for s in samples) for p in probe_topk(active)})
        before = self._before_update(plan, active, progress)
        tally = Tally(self._stat_keys(plan))
        # Each term's per-sample records: (sums, counts) x names x samples, summed over epochs and ranks.
        kept = {key: torch.zeros(2, len(term.records), plan.n_seqs, dtype=torch.float64)
                for key, term in self.objectives if term.records}
        # ZeRO-2 reduces gradients inside every backward, so every rank must run as many.
        backwards = int(max_value(self.dist, len(plan.micro))) if self.engine is not None and self.dist.active else 0
        grad_norm = 0.0
        for epoch in range(cfg.updates_per_batch):
            for k in range(len(plan.micro)):
                self._micro_step(plan, before, k, epoch, tally, kept, totals, progress)
            for _ in range(backwards - len(plan.micro)):  # this rank has fewer micro-batches: add zeros
                self._backward(sum(p.sum() for p in self.module.parameters() if p.requires_grad) * 0.0)
            grad_norm = self._optimizer_step()
        if self.magnet is not None:
            self.magnet.after_step(self._weights())
        return self._step_stats(plan, before, tally, kept, grad_norm, lr, progress) | whiten_stats

    def _skips_inert(self) -> bool:
        """``learner.skip_inert_rows``, where the loss is the policy gradient alone: a row with advantage 0 or
        weight 0 then adds nothing to any gradient (arena/learners/plan.py ``inert``)."""
        cfg = self.cfg
        return (cfg.skip_inert_rows and cfg.beta == 0 and cfg.choice_entropy == 0 and cfg.token_entropy == 0
                and self.magnet is None and not self.objectives)

    def _stat_keys(self, plan: StepPlan) -> dict[str, float]:
        """The step's summed statistics, each at 0: the same keys on every rank (they are summed over ranks)."""
        cfg = self.cfg
        stats = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0} | {key: 0.0 for key, _ in self.objectives}
        if cfg.choice_entropy > 0 and plan.n_choices:
            stats["choice_entropy"] = 0.0
        if cfg.token_entropy > 0:
            stats["token_entropy"] = 0.0
        if self.magnet is not None:
            stats["magnet/kl"] = 0.0
        if cfg.bound.move > 0 or cfg.bound.saturation > 0:
            stats["bound/stopped_frac"] = 0.0
        if self._skips_inert():  # this rank's rows left out, summed over ranks with the rest
            stats["rows_skipped"] = float(plan.n_skipped)
        return stats

    def _before_update(self, plan: StepPlan, active: Sequence[Objective], progress: Progress | None) -> Before:
        """The no-grad passes before the update: the reference, the magnet (when its coefficient is not 0 at this
        step), the probes and the reweighting."""
        cfg, samples, micro = self.cfg, plan.samples, plan.micro
        need = probe_topk([term for term in active if term.loss_probes])
        with torch.no_grad():
            # The "old" logprobs are those before the first optimizer step: the first epoch's own forward,
            # detached (every micro-batch of it runs before that step), kept for every later epoch.
            old: list[torch.Tensor | None] = [None] * len(micro)
            ref = [s.logp for s in self._scored(self.ref_model, samples, micro)] if cfg.beta > 0 else None
            magnet, coef = None, 0.0
            if self.magnet is not None:
                coef = self.magnet.coef(progress)
                if coef > 0:
                    with self.magnet.scoring(self.module, self._trained()) as model:
                        magnet = self._scored(model, samples, micro)
            # Probes are scored once, by the weights before this step's updates.
            probes = [self._probe_dists(samples, mb, need) for mb in micro]
            reweight_stats, reweight_records = self._reweight(samples, micro, probes, progress)
        for hook in self.after_passes:
            hook()
        return Before(old, ref, magnet, coef, probes, reweight_stats, reweight_records)

    def _micro_step(self, plan: StepPlan, before: Before, k: int, epoch: int, tally: Tally, kept: dict[str, torch.Tensor],
                    totals: BatchTotals, progress: Progress | None) -> None:
        """One micro-batch of one epoch: its forward, its share of the whole batch's loss, backward."""
        cfg, mb, n = self.cfg, plan.micro[k], self.cfg.updates_per_batch
        logp_full = None  # (b, T, V), made only for what needs the whole distribution
        if cfg.token_entropy > 0 or self.objectives:
            logp_full = self._log_softmax(self._forward_model(), mb)
            logp = logp_full.gather(-1, mb.completion_ids[..., None]).squeeze(-1)
        else:
            logp = self._logprobs(self._forward_model(), mb)
        logp, choices = self._normalise_choices(self._forward_model(), plan.samples, mb, logp)
        if before.old[k] is None:
            before.old[k] = logp.detach()
        old: torch.Tensor = before.old[k]  # type: ignore[assignment]
        pg = self._policy_gradient(plan, mb, logp, old, epoch, tally)
        per_token = pg
        kl = torch.zeros_like(logp)
        if before.ref is not None:
            kl = kl_penalty(logp, before.ref[k], cfg.kl_estimator)
            per_token = pg + cfg.beta * kl
        per_token = per_token * mb.weights[:, None]
        w = plan.aggregation(mb, cfg)
        loss = (per_token * w).sum()
        loss = self._regularisers(loss, plan, before, k, logp_full, logp, choices, w, tally)
        if self.objectives:
            ctx = ObjectiveContext(mb, logp_full, before.probes[k], mb.weights, progress, totals,  # type: ignore[arg-type]
                                   plan.samples)
            for key, term in self.objectives:
                value = term.loss(ctx)
                loss = loss + value
                tally.add(key, float(value.detach()) / n)
                if ctx.record:
                    keep_records(kept[key], term.records, ctx.record, mb.index)
                    ctx.record.clear()
        self._backward(loss)
        with torch.no_grad():
            tok_w = mb.completion_mask / plan.n_tokens
            ratio = torch.exp(logp - old)
            clipped = ((ratio < 1 - cfg.clip_low) | (ratio > 1 + cfg.clip_high)).float()
            tally.add("loss", float(loss) / n)
            tally.add("pg_loss", float((pg * mb.weights[:, None] * w).sum()) / n)
            tally.add("kl", float((kl * tok_w).sum()) / n)
            tally.add("clip_frac", float((clipped * tok_w).sum()) / n)

    def _policy_gradient(self, plan: StepPlan, mb: MicroBatch, logp: torch.Tensor, old: torch.Tensor, epoch: int,
                         tally: Tally) -> torch.Tensor:
        """``(b, T)`` per-token policy-gradient loss: the clipped surrogate (ratios to the logprobs before the
        first epoch) or detached REINFORCE on ``A_b * token_weight_bt``, times the importance weights, with the
        pushes ``learner.bound`` stops set to 0."""
        cfg = self.cfg
        adv = mb.advantages[:, None] * mb.token_weights  # (b, T); exact when the weights are 1
        if cfg.loss == "clipped":
            pg = clipped_surrogate(logp, old, adv, cfg.clip_low, cfg.clip_high)
        else:
            pg = reinforce_detached(logp, adv)
        is_w, rho = importance_weights(old, mb.gen_logprobs, cfg.importance.mode, cfg.importance.cap)  # type: ignore[arg-type]
        pg = pg * is_w
        if epoch == 0:  # generator vs learner, same tokens, before any update
            tally.first_epoch(mb, old, rho, is_w, cfg.importance.cap)
        if cfg.bound.move > 0 or cfg.bound.saturation > 0:
            p, p0 = decision_probabilities(logp, old, mb.completion_mask, plan.is_choice(mb))
            keep = bound_keep(p, p0, adv, cfg.bound.move, cfg.bound.saturation)
            pg = pg * keep
            stopped = (~keep).float() * mb.completion_mask / plan.n_tokens
            tally.add("bound/stopped_frac", float(stopped.sum()) / cfg.updates_per_batch)
        return pg

    def _regularisers(self, loss: torch.Tensor, plan: StepPlan, before: Before, k: int, logp_full: torch.Tensor | None,
                      logp: torch.Tensor, choices: Choices | None, w: torch.Tensor, tally: Tally) -> torch.Tensor:
        """``loss`` plus this micro-batch's share of the entropy bonuses and the magnet's KL (each on only when
        configured). Chosen replies' terms are a mean over the batch's chosen replies (unweighted, as
        ``choice_entropy``); generated replies' are aggregated as the policy-gradient loss (``w`` times
        ``Sample.weight``)."""
        cfg, mb, n = self.cfg, plan.micro[k], self.cfg.updates_per_batch
        free = (~plan.is_choice(mb)).to(w.dtype)[:, None] * w * mb.weights[:, None]  # (b, T) generated rows
        if choices is not None and cfg.choice_entropy > 0:  # -coef x the mean entropy over the chosen replies
            bonus = choice_entropy(choices.own, choices.alt_sums, choices.owner).sum() / plan.n_choices
            loss = loss - cfg.choice_entropy * bonus
            tally.add("choice_entropy", float(bonus.detach()) / n)
        if cfg.token_entropy > 0:  # -coef x the aggregated entropy at the generated tokens
            bonus = (token_entropy(logp_full) * free).sum()  # type: ignore[arg-type]  # made when token_entropy > 0
            loss = loss - cfg.token_entropy * bonus
            tally.add("token_entropy", float(bonus.detach()) / n)
        if before.magnet is not None and cfg.magnet is not None:  # +coef x KL(pi || rho)
            scored = before.magnet[k]
            part = logp.new_zeros(())
            if choices is not None and scored.table is not None:  # exact, over each chosen reply's choices
                logq, valid = choices.table()
                part = part + choice_kl(logq, scored.table[0], valid).sum() / plan.n_choices
            used = free != 0  # generated tokens: the estimator; elsewhere its input is rho's own (0, no inf)
            tokens = kl_penalty(torch.where(used, logp, scored.logp), scored.logp, cfg.magnet.estimator)
            part = part + (tokens * free).sum()
            loss = loss + before.magnet_coef * part
            tally.add("magnet/kl", float(part.detach()) / n)
        return loss

    def _step_stats(self, plan: StepPlan, before: Before, tally: Tally, kept: dict[str, torch.Tensor], grad_norm: float,
                    lr: float, progress: Progress | None) -> dict[str, float]:
        """The step's statistics: the tally summed over ranks, the terms' own, the step's counts."""
        stats, derived = tally.summed(self.dist, len(plan.micro))
        stats.update(before.reweight_stats)
        stats.update(self._term_stats(plan.samples, kept, before.reweight_records, progress))
        stats.update(
            grad_norm=grad_norm,
            samples=float(plan.n_seqs),
            tokens=plan.n_tokens,
            micro_batches=derived.pop("micro_batches"),
            adv_mean=float(torch.tensor([s.advantage for s in plan.samples]).mean()),
            logprob_gap=derived.pop("logprob_gap"),
        )
        if self.cfg.lr_schedule != "constant":
            stats["lr"] = lr
        if self.magnet is not None:
            stats["magnet/coef"] = before.magnet_coef
        stats.update(derived)  # the per-token ratio learner/generator (is/*), where a generator gave logprobs
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


    def _backward(self, loss: torch.Tensor) -> None:
        if self.engine is not None:  # DeepSpeed averages the ranks' gradients; ours must sum
            self.engine.backward(loss * self.dist.world if self.dist.active else loss, scale_wrt_gas=False)
        else:
            self._updating = True
            try:
                loss.backward()
            finally:
                self._updating = False
            if self.master is not None:  # bf16 weights: a gradient the hooks did not move (none expected)
                for m, p in zip(self.master, self._trained(), strict=True):
                    if p.grad is not None:
                        _into_master(m, p)

    def _grad_ready(self, master: torch.Tensor, param: torch.Tensor) -> None:
        """A bf16 weight's gradient is complete: in the update's backward pass it moves into the master's."""
        if self._updating:
            _into_master(master, param)

    def _trained(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def _weights(self) -> list[torch.Tensor]:
        """The trained weights at full precision: the fp32 master with bf16 weights, else the parameters."""
        return self.master if self.master is not None else list(self._trained())

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
        master weights, which the checkpoint's bf16 model does not hold (exact resume needs them); with
        ``learner.magnet`` the magnet's own weights and step count. Like torch's ``Optimizer.state_dict``,
        it holds the learner's own tensors, not copies (a copy of the master cost a checkpoint 4 bytes a
        parameter more at its peak): write it, or copy it, before the next step."""
        out: dict[str, Any] = {"optimizer": self.optimizer.state_dict()}
        if self.master is not None:
            out["master"] = [m.detach() for m in self.master]
        if self.magnet is not None:
            out["magnet"] = self.magnet.state_dict()
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
        if self.magnet is not None:  # a checkpoint without one (another config): the magnet starts afresh
            self.magnet.load_state_dict(state.get("magnet"), self.device)


@torch.no_grad()
def _into_master(master: torch.Tensor, param: torch.Tensor) -> None:
    """Add a bf16 weight's gradient into its fp32 master's (``master.grad``) and drop it."""
    master.grad = param.grad.float() if master.grad is None else master.grad.add_(param.grad)
    param.grad = None
