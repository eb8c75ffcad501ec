"""Supervised fine-tuning on demonstrations through the policy learner (the warm start, ``train.warm_start``).

A demonstration is a :class:`~arena.core.types.Sample` like an RL sample (the prompt's token ids,
the completion's token ids, ``advantage = 1``), so it is packed, padded and masked exactly as the
RL samples are (:func:`arena.learners.batch.pack`, :func:`arena.learners.batch.collate`: only real completion
tokens count, never the prompt or the padding). The loss is the completion tokens' negative
log-likelihood, one token mean over the WHOLE batch:

    L = - sum_{b,t} m_bt * log pi(y_bt | x_b, y_<bt) / sum_{b,t} m_bt

with ``m`` the completion mask and ``pi`` the model's softmax at temperature 1 (the demonstrations'
own distribution, not the sampling temperature). Each micro-batch adds its share
``sum m_bt * (-log pi) / N_tokens`` (``N_tokens`` over the whole batch and, with several ranks,
over every rank's samples), so micro-batching and several ranks give the full-batch gradient.
The backward pass, fp32 master weights (``param_dtype: bfloat16``), gradient clipping and the
optimizer step are the learner's own (:class:`arena.learners.update.Learner`); the warm start sets its
own learning rate on the learner's optimizer for its steps and clears the optimizer's moments when
it ends, so self-play starts with a fresh AdamW state (:func:`reset_optimizer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from arena.core.distributed import sum_values
from arena.core.types import Sample
from arena.learners.batch import collate, completion_log_softmax, pack
from arena.learners.losses import aggregation_weights
from arena.learners.progress import set_lr  # shared with Learner.step's lr schedule; imported from here too


def demo_sample(prompt_ids: Sequence[int], completion_ids: Sequence[int], phase: str = "", role: str = "") -> Sample:
    """A demonstration as a learner sample: advantage 1, no generator logprobs."""
    return Sample(prompt_ids=list(prompt_ids), completion_ids=list(completion_ids), advantage=1.0, phase=phase, role=role)


def nll_terms(logp: torch.Tensor, completion_ids: torch.Tensor, mask: torch.Tensor, batch_tokens: float) -> torch.Tensor:
    """A micro-batch's share of the batch's token-mean NLL. ``logp: (b, T, V)``, ids and mask ``(b, T)`` -> ``()``."""
    token_logp = logp.gather(-1, completion_ids[..., None]).squeeze(-1)
    return -(token_logp * aggregation_weights(mask, "token", batch_tokens, mask.shape[0], None)).sum()


def reset_optimizer(learner: Any) -> None:
    """Forget the optimizer's moments (AdamW's ``exp_avg``, ``exp_avg_sq``, step counts) and restore the
    learner's configured learning rate: the state a fresh learner starts with."""
    learner.optimizer.state.clear()
    set_lr(learner, learner.cfg.lr)


def sft_step(learner: Any, samples: Sequence[Sample], local: Sequence[int] | None = None) -> dict[str, float]:
    """One optimizer step of the learner on the demonstrations ``samples`` (token-mean NLL, see the module).

    ``local``: the indices of this rank's samples (several ranks); None: all. Returns ``nll`` (the batch's
    mean NLL per completion token, before the step), ``tokens``, ``samples``, ``micro_batches``, ``grad_norm``.
    """
    if not samples:
        return {"samples": 0.0}
    cfg = learner.cfg
    index = list(range(len(samples))) if local is None else list(local)
    mine = [samples[i] for i in index]
    groups = [[index[i] for i in g] for g in pack(mine, cfg.token_budget, share_prompts=cfg.share_prompt_prefix)]
    n_tokens = float(sum(len(s.completion_ids) for s in samples))
    nll = 0.0
    autocast = bool(cfg.autocast_bf16) and learner.engine is None
    for g in groups:
        mb = collate(samples, g, learner.pad_id, learner.device)
        with torch.autocast(device_type=learner.device.type, dtype=torch.bfloat16, enabled=autocast):
            logp = completion_log_softmax(learner._forward_model(), mb, 1.0, cfg.share_prompt_prefix)
        loss = nll_terms(logp, mb.completion_ids, mb.completion_mask, n_tokens)
        learner._backward(loss)
        nll += float(loss.detach())
    sums = sum_values(learner.dist, {"nll": nll, "micro": float(len(groups))})
    grad_norm = learner._optimizer_step()
    return {"nll": sums["nll"], "tokens": n_tokens, "samples": float(len(samples)),
            "micro_batches": sums["micro"], "grad_norm": grad_norm}
