"""The update step on the shared policy: micro-batches by token budget, accumulation, clipping.

``Learner.step(samples)`` runs ``updates_per_batch`` optimizer steps on one batch:

1. pack samples into micro-batches whose padded size fits ``token_budget``;
2. take the "old" log-probabilities from the current weights (a separate no-grad
   pass only when ``updates_per_batch > 1``; otherwise the training forward's own,
   detached), and the reference log-probabilities when ``beta > 0``; the mean
   absolute gap between the generator's sampling logprobs and the learner's is
   reported (stale weights or a broken sync show up there first);
3. for each micro-batch: per-token loss (clipped surrogate or detached REINFORCE,
   plus ``beta`` * KL), weighted so that the sum over micro-batches equals the
   loss over the whole batch, backward; then clip gradients and step.

``backend: torch`` uses AdamW; ``backend: deepspeed`` builds a DeepSpeed engine
(ZeRO 0-3, optional bf16) that runs on GPUs and on CPU with gloo. Log-probs use
the sampling temperature, like the generator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arena.types import Sample
from learners.config import LearnerConfig
from learners.losses import clipped_surrogate, kl_penalty, reinforce_detached, token_weights


@dataclass
class MicroBatch:
    """Left-padded prompts followed by right-padded completions. Tensors are ``(b, L)`` / ``(b, T)``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    completion_mask: torch.Tensor  # (b, T) 1.0 on real completion tokens
    completion_ids: torch.Tensor  # (b, T)
    advantages: torch.Tensor  # (b,)
    gen_logprobs: torch.Tensor  # (b, T), NaN where the generator gave none
    index: list[int]  # positions of these samples in the batch
    shared_prompt: bool = False  # every row has the same prompt: run it once


def pack(samples: Sequence[Sample], token_budget: int, share_prompts: bool = False) -> list[list[int]]:
    """Group sample indices into micro-batches within ``token_budget`` padded tokens.

    With ``share_prompts``, samples with the same prompt (a GRPO group, SpyRL's
    civilians) form their own micro-batches, costed as one prompt plus the rows'
    completions, since the prompt is run once for all of them.
    """
    groups: list[list[int]] = []
    rest = list(range(len(samples)))
    if share_prompts:
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i in rest:
            by_prompt.setdefault(tuple(samples[i].prompt_ids), []).append(i)
        rest = []
        for members in by_prompt.values():
            if len(members) < 2:
                rest.extend(members)
                continue
            p_len = len(samples[members[0]].prompt_ids)
            current: list[int] = []
            for i in sorted(members, key=lambda k: -len(samples[k].completion_ids)):
                longest = max([len(samples[j].completion_ids) for j in current] + [len(samples[i].completion_ids)])
                if current and p_len + longest * (len(current) + 1) > token_budget:
                    groups.append(current)
                    current = []
                current.append(i)
            groups.append(current)
    order = sorted(rest, key=lambda i: -samples[i].length)
    mixed: list[list[int]] = []
    for i in order:
        if mixed:
            g = mixed[-1]
            longest = max(samples[g[0]].length, samples[i].length)
            if longest * (len(g) + 1) <= token_budget:
                g.append(i)
                continue
        mixed.append([i])
    return groups + mixed


def collate(samples: Sequence[Sample], index: list[int], pad_id: int, device: torch.device) -> MicroBatch:
    rows = [samples[i] for i in index]
    p_len = max(len(s.prompt_ids) for s in rows)
    t_len = max(len(s.completion_ids) for s in rows)
    b = len(rows)
    ids = torch.full((b, p_len + t_len), pad_id, dtype=torch.long)
    attn = torch.zeros((b, p_len + t_len), dtype=torch.long)
    comp = torch.full((b, t_len), pad_id, dtype=torch.long)
    cmask = torch.zeros((b, t_len))
    gen = torch.full((b, t_len), float("nan"))
    for r, s in enumerate(rows):
        p, t = len(s.prompt_ids), len(s.completion_ids)
        ids[r, p_len - p : p_len] = torch.tensor(s.prompt_ids)
        ids[r, p_len : p_len + t] = torch.tensor(s.completion_ids)
        attn[r, p_len - p : p_len + t] = 1
        comp[r, :t] = torch.tensor(s.completion_ids)
        cmask[r, :t] = 1.0
        if s.logprobs:
            gen[r, :t] = torch.tensor(s.logprobs)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    adv = torch.tensor([s.advantage for s in rows], dtype=torch.float32)
    shared = len(rows) > 1 and all(s.prompt_ids == rows[0].prompt_ids for s in rows)
    to = lambda x: x.to(device)  # noqa: E731
    return MicroBatch(to(ids), to(attn), to(pos), to(cmask), to(comp), to(adv), to(gen), list(index), shared)


def completion_logprobs(model: Any, mb: MicroBatch, temperature: float, share_prompt: bool = False) -> torch.Tensor:
    """Log-probs of the completion tokens under ``model`` at ``temperature``. ``-> (b, T)``.

    When every row has the same prompt and ``share_prompt`` is set, the prompt is run
    once and its KV cache repeated for the rows (same values and gradients, fewer
    FLOPs: a GRPO group's prompt is usually longer than its completions).
    """
    b, t_len = mb.completion_ids.shape
    if share_prompt and mb.shared_prompt:
        p_len = mb.input_ids.shape[1] - t_len
        head = model(input_ids=mb.input_ids[:1, :p_len], use_cache=True, logits_to_keep=1)
        cache = head.past_key_values
        cache.batch_repeat_interleave(b)
        tail = model(
            input_ids=mb.completion_ids, attention_mask=mb.attention_mask, position_ids=mb.position_ids[:, p_len:],
            past_key_values=cache, use_cache=True, logits_to_keep=t_len,
        )
        logits = torch.cat([head.logits.expand(b, -1, -1), tail.logits[:, :-1, :]], dim=1).float()
    else:
        out = model(
            input_ids=mb.input_ids, attention_mask=mb.attention_mask, position_ids=mb.position_ids,
            logits_to_keep=t_len + 1, use_cache=False,
        )
        logits = out.logits[:, :-1, :].float()
    if temperature > 0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, mb.completion_ids[..., None]).squeeze(-1)


class Learner:
    """Updates ``model`` in place from batches of :class:`~arena.types.Sample`."""

    def __init__(self, model: Any, cfg: LearnerConfig, pad_id: int, temperature: float = 1.0, ref_model: Any | None = None):
        self.cfg = cfg
        self.model = model
        self.pad_id = pad_id
        self.temperature = temperature
        self.ref_model = ref_model
        if cfg.beta > 0 and ref_model is None:
            raise ValueError("learner.beta > 0 needs the frozen reference model")
        self.device = next(model.parameters()).device
        model.train()
        if cfg.backend == "deepspeed":
            from learners.ds import build_engine

            self.engine = build_engine(model, cfg)
            self.optimizer = self.engine.optimizer
        else:
            self.engine = None
            # The fused AdamW kernel is 3x faster than the per-tensor loop on this CPU (measured).
            self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)

    @property
    def module(self) -> Any:
        return self.engine.module if self.engine is not None else self.model

    def _forward_model(self) -> Any:
        return self.engine if self.engine is not None else self.model

    def _logprobs(self, model: Any, mb: MicroBatch) -> torch.Tensor:
        enabled = self.cfg.autocast_bf16 and self.engine is None
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=enabled):
            return completion_logprobs(model, mb, self.temperature, self.cfg.share_prompt_prefix)

    def step(self, samples: Sequence[Sample]) -> dict[str, float]:
        if not samples:
            return {"samples": 0.0}
        cfg = self.cfg
        groups = pack(samples, cfg.token_budget, share_prompts=cfg.share_prompt_prefix)
        micro = [collate(samples, g, self.pad_id, self.device) for g in groups]
        n_tokens = float(sum(len(s.completion_ids) for s in samples))
        n_seqs = len(samples)
        constant = float(max(len(s.completion_ids) for s in samples))
        with torch.no_grad():
            # One update per batch is on-policy: the "old" logprobs are the current ones,
            # taken (detached) from the training forward itself; no extra pass needed.
            old: list[torch.Tensor | None] = [None] * len(micro)
            if cfg.updates_per_batch > 1:
                old = [self._logprobs(self._forward_model(), mb) for mb in micro]
            ref = [self._logprobs(self.ref_model, mb) for mb in micro] if cfg.beta > 0 else None
        stats = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0}
        gap_sum, gap_count = 0.0, 0.0
        grad_norm = 0.0
        for epoch in range(cfg.updates_per_batch):
            for k, mb in enumerate(micro):
                logp = self._logprobs(self._forward_model(), mb)
                if old[k] is None:
                    old[k] = logp.detach()
                if epoch == 0:  # generator vs learner, same tokens, before any update
                    seen = (~mb.gen_logprobs.isnan()).float() * mb.completion_mask
                    gap_sum += float(((mb.gen_logprobs - old[k]).abs() * seen).nan_to_num(0.0).sum())
                    gap_count += float(seen.sum())
                if cfg.loss == "clipped":
                    pg = clipped_surrogate(logp, old[k], mb.advantages, cfg.clip_low, cfg.clip_high)  # type: ignore[arg-type]
                else:
                    pg = reinforce_detached(logp, mb.advantages)
                per_token = pg
                kl = torch.zeros_like(logp)
                if ref is not None:
                    kl = kl_penalty(logp, ref[k], cfg.kl_estimator)
                    per_token = pg + cfg.beta * kl
                w = token_weights(mb.completion_mask, cfg.aggregation, n_tokens, n_seqs, constant)
                loss = (per_token * w).sum()
                self._backward(loss)
                with torch.no_grad():
                    tok_w = mb.completion_mask / n_tokens
                    ratio = torch.exp(logp - old[k])  # type: ignore[operator]
                    clipped = ((ratio < 1 - cfg.clip_low) | (ratio > 1 + cfg.clip_high)).float()
                    stats["loss"] += float(loss) / cfg.updates_per_batch
                    stats["pg_loss"] += float((pg * w).sum()) / cfg.updates_per_batch
                    stats["kl"] += float((kl * tok_w).sum()) / cfg.updates_per_batch
                    stats["clip_frac"] += float((clipped * tok_w).sum()) / cfg.updates_per_batch
            grad_norm = self._optimizer_step()
        stats.update(
            grad_norm=grad_norm,
            samples=float(n_seqs),
            tokens=n_tokens,
            micro_batches=float(len(micro)),
            adv_mean=float(torch.tensor([s.advantage for s in samples]).mean()),
            logprob_gap=gap_sum / gap_count if gap_count else float("nan"),
        )
        return stats

    def _backward(self, loss: torch.Tensor) -> None:
        if self.engine is not None:
            self.engine.backward(loss, scale_wrt_gas=False)
        else:
            loss.backward()

    def _optimizer_step(self) -> float:
        if self.engine is not None:
            self.engine.step()
            norm = self.engine.get_global_grad_norm()
            return float(norm) if norm is not None else float("nan")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
