"""Batched generation with transformers, returning token ids and sampling logprobs.

The decode loop is written out (prefill, then one token per step on a KV
cache) rather than calling ``model.generate``, for two reasons: the logprob of
each sampled token is taken from the exact distribution it was sampled from
(after temperature and top-p) without keeping a ``(batch, steps, vocab)``
score tensor alive, and sampling uses local ``torch.Generator`` s, so no global
RNG is touched. With ``per_request_rng`` (the default) each request has its OWN
generator, seeded from its own seed (:func:`row_seeds`), so a seeded request draws
the same random numbers whichever other requests share its batch: batched and
one-at-a-time play agree up to floating-point differences of the batched forward
pass (padding and batch shape change the logits in the last bits, which can flip
a draw that falls within that margin of a token boundary). Without it (the
behaviour before), one generator seeded from all the batch's seeds serves the
batch: a completion is reproducible only for the same batch composition, so
batched and one-at-a-time play agree only with scripted policies. Rows that finish are dropped from the
batch (their KV cache rows too), so a long straggler does not make the whole
batch pay for its length. With ``prefix_sharing`` (the default) a prompt that several
requests of one batch repeat (G solvers or attempts, a GRPO group) is prefilled once
and its KV cache copied to its rows, and the distinct prompts' common prefix (a game's rules before
each seat's view) is run once (:mod:`arena.policies.hf_prefix`); same tokens and logprobs as without
it, up to float noise in the last bits. With ``reuse_prefix`` (what arena's training loop builds) that
prefix's keys and values are kept for the next call, until the weights change
(:class:`~arena.policies.hf_prefix.PrefixMemo`): Kuhn's three turns of a step run the rules once.

Requests carry their own :class:`~arena.policies.base.SamplingParams`; one call
generates each group of equal params as its own batches. Every prompt first
goes through :func:`~arena.policies.base.fit_prompt` against ``max_model_len`` (the
model's ``max_position_embeddings`` unless given), so an over-long prompt is
truncated on the left or answered with ``finish_reason="overflow"`` instead of
failing the batch. A request with ``choices`` is not generated: one of its choices is drawn by its
scored likelihood as the whole reply (:mod:`arena.policies.choices`), its prompt fitted beside the
longest choice. Every choice of every such request of one call is scored together (:meth:`HFPolicy.score_rows`:
the distinct prompts prefilled once, then all the choices on their KV cache, two forward passes per batch
of rows), equal to :meth:`HFPolicy.score` row by row up to float32 rounding; a Kuhn step's 64 single-row
forwards became 4 (33.7 s -> 3.4 s, bench/choice_scoring.py).

Several trainable policies' LoRA adapters on one base (arena/learners/adapters.py) share one model: each
policy's ``adapter`` hook makes its own adapter active before every generation and scoring pass.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from arena.policies.base import (
    Completion, Overflow, Request, SamplingParams, chat_prompt_ids, check_overflow, fit_prompt, overflow_completion,
)
from arena.core.models import DEFAULT_MODEL, load_causal_lm
from arena.policies.choices import action_ids, choose
from arena.policies.hf_prefix import PrefixMemo, dedupe, expand, prefill, shared_len


def batch_seed(seeds: Sequence[int | None]) -> int:
    digest = hashlib.blake2b(repr(list(seeds)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def row_seeds(seeds: Sequence[int | None]) -> list[int]:
    """One generator seed per request: a hash of the request's own seed alone, so it does
    not depend on the batch. Unseeded requests hash (the batch's seeds, their row), which
    keeps them distinct from each other and reproducible for the same batch."""
    return [batch_seed([s]) if s is not None else batch_seed([batch_seed(seeds), row]) for row, s in enumerate(seeds)]


def sampling_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Log-probabilities of the distribution actually sampled from. ``(B, V) -> (B, V)``.

    Greedy (temperature 0) is scored under the untempered model distribution.
    """
    logits = logits.float()
    if params.temperature > 0:
        logits = logits / params.temperature
    logp = torch.log_softmax(logits, dim=-1)
    if params.temperature > 0 and params.top_p < 1.0:
        sorted_logp, order = logp.sort(dim=-1, descending=True)
        cum = sorted_logp.exp().cumsum(dim=-1)
        drop_sorted = cum - sorted_logp.exp() >= params.top_p  # keep the smallest set reaching top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logp = torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)
    return logp


class HFPolicy:
    """A :class:`~arena.policies.base.Policy` on a transformers causal LM."""

    def __init__(
        self,
        model: str | Any = DEFAULT_MODEL,
        tokenizer: Any | None = None,
        dtype: str = "bfloat16",
        device: str = "cpu",
        max_batch_size: int = 64,
        max_batch_tokens: int = 32768,
        name: str = "hf",
        prefill_attention: str = "sdpa",
        decode_attention: str = "eager",
        max_model_len: int | None = None,
        overflow: Overflow = "truncate",
        per_request_rng: bool = True,
        prefix_sharing: bool = True,
        reuse_prefix: bool = False,
    ):
        if isinstance(model, str):
            model, tokenizer = load_causal_lm(model, dtype=dtype, device=device)
        elif tokenizer is None:
            raise ValueError("pass the tokenizer together with a model object")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.overflow = check_overflow(overflow)
        self.max_model_len = max_model_len or getattr(model.config, "max_position_embeddings", None)
        if not self.max_model_len:
            raise ValueError("pass max_model_len: the model config has no max_position_embeddings")
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.prefill_attention = prefill_attention
        self.decode_attention = decode_attention
        self.device = torch.device(device)
        self.eos_ids = self._eos_ids()
        self._default_attention = model.config._attn_implementation
        self.tokens_generated = 0
        self.per_request_rng = per_request_rng
        self.prefix_sharing = prefix_sharing
        self.prefill_rows_saved = 0  # rows whose prompt was not prefilled again (prefix sharing)
        self.prefill_tokens_shared = 0  # prompts' common-prefix tokens not run again (generate and score_rows)
        # The last call's common prefix, reused while the weights are unchanged (``reuse_prefix``: only where every
        # change of the weights is one torch counts, as arena's learner makes its optimizer steps; .reused counts).
        self.prefix_memo = PrefixMemo() if reuse_prefix and prefix_sharing else None
        # A shared base's adapters: makes this policy's adapter the active one (None: the model as it is).
        self.adapter: Callable[[], None] | None = None

    def _eos_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        return {i for i in ids if i is not None}

    def encode(self, request: Request) -> list[int]:
        return chat_prompt_ids(self.tokenizer, request.messages)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        results: list[Completion | None] = [None] * len(requests)
        groups: dict[SamplingParams, list[int]] = defaultdict(list)
        prompts: dict[int, list[int]] = {}
        truncated: set[int] = set()
        chosen = row_seeds([r.seed for r in requests])  # requests with choices: one draw each, own seed
        choosing: dict[int, tuple[list[int], bool]] = {}  # request -> (fitted prompt, truncated)
        for i, req in enumerate(requests):
            ids = self.encode(req)
            if req.choices is not None:
                # Fitted beside the longest choice; scored below, every such request's choices batched.
                budget = max(len(action_ids(self.tokenizer, c)) for c in req.choices or [""])
                fitted_choice = fit_prompt(ids, budget, self.max_model_len, self.overflow)
                if fitted_choice is None:
                    results[i] = overflow_completion()
                else:
                    choosing[i] = (fitted_choice[0], len(fitted_choice[0]) < len(ids))
                continue
            fitted = fit_prompt(ids, req.params.max_new_tokens, self.max_model_len, self.overflow)
            if fitted is None:
                results[i] = overflow_completion()
                continue
            prompts[i], budget = fitted
            if len(prompts[i]) < len(ids):
                truncated.add(i)
            params = req.params
            if budget != params.max_new_tokens:  # cut to fit the context: its own group
                params = params.model_copy(update={"max_new_tokens": budget})
            groups[params].append(i)
        for params, members in groups.items():
            for chunk in self.plan_batches({i: len(prompts[i]) + params.max_new_tokens for i in members}):
                given = [requests[i].seed for i in chunk]
                seeds = row_seeds(given) if self.per_request_rng else batch_seed(given)
                for i, comp in zip(chunk, self.generate_ids([prompts[i] for i in chunk], params, seeds), strict=True):
                    comp.prompt_truncated = i in truncated
                    results[i] = comp
        for i, comp in self._choose({i: (requests[i], p) for i, (p, _) in choosing.items()}, chosen).items():
            comp.prompt_truncated = choosing[i][1]
            results[i] = comp
        return [r for r in results if r is not None]

    def _choose(self, pending: dict[int, tuple[Request, list[int]]], seeds: Sequence[int]) -> dict[int, Completion]:
        """One of each request's ``choices`` (request id -> (request, fitted prompt)), drawn by its scored
        likelihood (arena/policies/choices.py) with ``seeds[id]``. Every choice of every request is a row
        ``prompt + action_ids(choice)``, scored by :meth:`score_rows`; requests of equal params share its
        batches, planned by rows (a request weighs its number of choices)."""
        ids = {i: [action_ids(self.tokenizer, c) for c in req.choices or []] for i, (req, _) in pending.items()}
        groups: dict[SamplingParams, list[int]] = defaultdict(list)
        for i, (req, _) in pending.items():
            groups[req.params].append(i)
        out: dict[int, Completion] = {}
        for params, members in groups.items():
            lengths = {i: len(pending[i][1]) + max((len(c) for c in ids[i]), default=0) for i in members}
            for chunk in self.plan_batches(lengths, {i: len(ids[i]) for i in members}):
                rows = [(pending[i][1], c) for i in chunk for c in ids[i]]
                scored = iter(self.score_rows([p for p, _ in rows], [c for _, c in rows], params))
                for i in chunk:
                    own = [next(scored) for _ in ids[i]]
                    out[i] = choose(pending[i][0], pending[i][1], ids[i], own, seeds[i])
                    self.tokens_generated += len(out[i].completion_ids)
        return out

    def plan_batches(self, lengths: dict[int, int], weights: dict[int, int] | None = None) -> list[list[int]]:
        """Split requests (id -> prompt + budget length) into batches of similar length.

        A batch holds at most ``max_batch_size`` rows and ``max_batch_tokens`` padded
        tokens, which bounds the prefill's attention memory for long prompts. ``weights``:
        rows per request (a request with choices is one row per choice; 1 if not given); a
        request heavier than the limits is a batch alone.
        """
        batches: list[list[int]] = []
        rows = 0
        for i in sorted(lengths, key=lambda k: lengths[k]):
            w = weights[i] if weights else 1
            if batches and rows + w <= self.max_batch_size and lengths[i] * (rows + w) <= self.max_batch_tokens:
                batches[-1].append(i)
                rows += w
                continue
            batches.append([i])
            rows = w
        return batches

    def generate_ids(
        self, prompts: list[list[int]], params: SamplingParams, seed: int | Sequence[int] = 0
    ) -> list[Completion]:
        """Generate for token-id prompts (one batch, left padded; the caller makes them fit the context).

        ``seed``: one generator seed per prompt (rows sample independently), or one int
        seeding a single generator shared by the batch.
        """
        if not isinstance(seed, int) and len(seed) != len(prompts):
            raise ValueError(f"generate_ids: {len(seed)} seeds for {len(prompts)} prompts")
        if self.adapter is not None:
            self.adapter()
        try:
            return self._decode(prompts, params, seed if isinstance(seed, int) else list(seed))
        finally:
            self._set_attention(self._default_attention)

    @torch.inference_mode()
    def _decode(self, prompts: list[list[int]], params: SamplingParams, seeds: int | list[int]) -> list[Completion]:
        from transformers import DynamicCache

        if isinstance(seeds, int):  # one generator for the whole batch
            shared = torch.Generator(device=self.device).manual_seed(seeds)
        else:  # one generator per row
            gens = [torch.Generator(device=self.device).manual_seed(s) for s in seeds]
        batch = len(prompts)
        # A prompt repeated in the batch is prefilled once, then its KV cache is copied to its rows.
        distinct, index = dedupe(prompts) if self.prefix_sharing else (prompts, list(range(batch)))
        width = max(len(p) for p in distinct)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(distinct), width), pad, dtype=torch.long)
        mask = torch.zeros((len(distinct), width), dtype=torch.long)
        for row, ids in enumerate(distinct):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            mask[row, width - len(ids) :] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        self._set_attention(self.prefill_attention)
        # Logits at the last position only (the prompt's others would be (batch, width, vocab): gigabytes); the
        # distinct prompts' common prefix (a game's rules) runs once.
        shared_prefix = shared_len(distinct) if self.prefix_sharing else 0
        logits, mask = prefill(self.model, input_ids, mask, positions, cache, shared_prefix, self.prefix_memo)
        self.prefill_tokens_shared += shared_prefix * (len(distinct) - 1)
        if len(distinct) < batch:
            logits, mask, positions = expand(cache, index, logits, mask, positions)
        self.prefill_rows_saved += batch - len(distinct)
        alive = list(range(batch))  # original row of each live batch position
        tokens: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        finish = ["length"] * batch
        next_pos = positions[:, -1] + 1
        stop = params.stop
        self._set_attention(self.decode_attention)
        for _ in range(params.max_new_tokens):
            logp = sampling_logprobs(logits, params)
            if params.temperature > 0:
                probs = logp.exp()
                if isinstance(seeds, int):
                    choice = torch.multinomial(probs, 1, generator=shared).squeeze(-1)
                else:
                    choice = torch.cat([torch.multinomial(probs[pos], 1, generator=gens[row]) for pos, row in enumerate(alive)])
            else:
                choice = logp.argmax(dim=-1)
            chosen_logp = logp.gather(-1, choice[:, None]).squeeze(-1).tolist()
            keep: list[int] = []
            for pos, (row, tok) in enumerate(zip(alive, choice.tolist(), strict=True)):
                tokens[row].append(tok)
                logprobs[row].append(chosen_logp[pos])
                if tok in self.eos_ids:
                    finish[row] = "stop"
                elif stop and any(s in self.tokenizer.decode(tokens[row][-16:]) for s in stop):
                    finish[row] = "stop"
                else:
                    keep.append(pos)
            if not keep:
                break
            if len(keep) < len(alive):
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                choice, mask, next_pos = choice[index], mask[index], next_pos[index]
                alive = [alive[p] for p in keep]
            mask = torch.cat([mask, mask.new_ones((len(alive), 1))], dim=-1)
            out = self.model(
                input_ids=choice[:, None],
                attention_mask=mask,
                position_ids=next_pos[:, None],
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
        self.tokens_generated += sum(len(t) for t in tokens)
        return [
            Completion(
                text=self._text(tokens[row], stop),
                prompt_ids=list(prompts[row]),
                completion_ids=tokens[row],
                logprobs=logprobs[row],
                finish_reason=finish[row],
            )
            for row in range(batch)
        ]

    def _set_attention(self, implementation: str) -> None:
        # Measured on a 2-core CPU in bf16 (64 rows, 700-token prompts): SDPA prefills
        # faster, eager attention decodes ~3x faster against a long padded KV cache.
        # transformers reads the implementation at every forward, so switching is free.
        self.model.config._attn_implementation = implementation

    def _text(self, ids: list[int], stop: Sequence[str]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        cut = min((text.find(s) for s in stop if s in text), default=-1)
        return text[:cut] if cut >= 0 else text

    @torch.inference_mode()
    def score_rows(
        self, prompts: list[list[int]], completions: list[list[int]], params: SamplingParams
    ) -> list[list[float]]:
        """``[score(p, c, params) for p, c in zip(prompts, completions)]`` in two forward passes (three when the
        prompts share a prefix), equal to it up to float32 rounding of the batched shapes.

        The distinct prompts are prefilled once (left padded, KV cache, logits only at the last position:
        the first completion token's; their common prefix run once, :func:`arena.policies.hf_prefix.prefill`,
        with ``prefix_sharing``), the cache copied to the rows, then every row's completion runs on
        it (right padded, positions ``len(prompt) + t``), its logits kept at its own tokens only: ``(rows,
        max completion, vocab)``, never the prompts'. Row ``r``'s token ``t`` is scored by the logits
        before it: ``log pi_T(c_t | p, c_<t) = sampling_logprobs(logits_{t-1})[c_t]``.
        """
        if not prompts:
            return []
        from transformers import DynamicCache

        if self.adapter is not None:
            self.adapter()
        dev = self.device
        distinct, index = dedupe(prompts)
        width = max(len(p) for p in distinct)
        input_ids = torch.full((len(distinct), width), self.tokenizer.pad_token_id or 0, dtype=torch.long)
        mask = torch.zeros((len(distinct), width), dtype=torch.long)
        for row, ids in enumerate(distinct):
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            mask[row, width - len(ids):] = 1
        input_ids, mask = input_ids.to(dev), mask.to(dev)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        self._set_attention(self.prefill_attention)
        try:
            shared = shared_len(distinct) if self.prefix_sharing else 0
            first, mask = prefill(self.model, input_ids, mask, positions, cache, shared, self.prefix_memo)
            self.prefill_tokens_shared += shared * (len(distinct) - 1)
            first, mask, last = expand(cache, index, first, mask, positions[:, -1])
            span = max(len(c) for c in completions)
            comp = torch.zeros((len(completions), span), dtype=torch.long)
            comp_mask = torch.zeros((len(completions), span), dtype=torch.long)
            for row, ids in enumerate(completions):
                comp[row, :len(ids)] = torch.tensor(ids)
                comp_mask[row, :len(ids)] = 1
            comp, comp_mask = comp.to(dev), comp_mask.to(dev)
            logits = first[:, None]
            if span > 1:  # the last token's logits score nothing
                rest = self.model(input_ids=comp[:, :-1], attention_mask=torch.cat([mask, comp_mask[:, :-1]], -1),
                                  position_ids=last[:, None] + 1 + torch.arange(span - 1, device=dev)[None],
                                  past_key_values=cache, use_cache=True).logits
                logits = torch.cat([logits, rest], dim=1)
        finally:
            self._set_attention(self._default_attention)
        logp = sampling_logprobs(logits.reshape(-1, logits.shape[-1]), params).view(*logits.shape)
        picked = logp.gather(-1, comp[..., None]).squeeze(-1).tolist()
        return [picked[row][:len(ids)] for row, ids in enumerate(completions)]

    @torch.inference_mode()
    def score(self, prompt_ids: list[int], completion_ids: list[int], params: SamplingParams) -> list[float]:
        """Teacher-forced logprobs of ``completion_ids`` under the same sampling transform."""
        if self.adapter is not None:
            self.adapter()
        ids = torch.tensor([prompt_ids + completion_ids], device=self.device)
        # Only the completion's positions: the prompt's logits would be (prompt, vocab), most of the cost.
        logits = self.model(input_ids=ids, logits_to_keep=len(completion_ids) + 1).logits[0, :-1]
        logp = sampling_logprobs(logits, params)
        return logp.gather(-1, torch.tensor(completion_ids, device=self.device)[:, None]).squeeze(-1).tolist()
