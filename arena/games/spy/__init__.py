"""SpyRL: who is the odd one out? (``spy_v1``)

Self-verifiable rewards through information asymmetry, after "From RLVR to
RLSVR: Task Transformation Induces Self-Verifiable Rewards for Open-Ended LLM
Self-Improvement" (arXiv 2607.23802) and its public code (RLSVR, branch SpyRL).

Seats
    ``player_0 .. player_{n-1}`` (default n = 5). With ``detector: god`` also
    ``detector_0 .. detector_{k-1}`` (k = ``god_samples``). Seat names never
    reveal the role.

Episode
    1. Draw a source x from the task's data (``task``: summary | story | math;
       ``data_path`` for a user JSONL) and a spy index u uniformly in 0..n-1.
    2. Civilians see x. The spy sees g(x): ONE contiguous span of ``mask_ratio``
       of the units (``mask_unit``: words | chars; default ratio 0.2 for summary
       and story, 0.4 for math) replaced unit by unit with ``mask_token`` ("*"),
       so the spy sees that something is missing and how much. Each player is
       told whether it is the spy. ``mask: fact`` (a variant, below) hides one
       concrete fact instead.
    3. Phase ``perform`` (hidden): every player does the task on its view and
       ends with a line ``Answer: ...``. Nobody sees another's output.
    4. Phase ``vote`` (hidden): each voter sees its own view and all players'
       answers labelled ``Player k`` (display order shuffled when
       ``shuffle_outputs``) and votes ``\\boxed{k}`` or ``\\boxed{N/A}``.
       Voters are the players (paper) or the god detectors, who see the full
       source (public-code variant).

Action grammar
    perform: the text after the last line starting ``Answer:`` (case-insensitive).
    Missing or empty -> invalid (``require_answer_line: false`` accepts the whole
    text instead). vote: the last balanced ``\\boxed{...}``; ``k`` in 0..n-1
    (``Player k``, ``$k$`` accepted) or ``N/A`` (``NA``, ``none``); anything else
    is invalid and, whatever the invalid-output mode, is not counted as a vote.
    ``vote_format: lenient`` (not the paper's rule, for small models) also reads
    the last ``Player k`` / ``N/A`` mentioned when there is no ``\\boxed{}``.

Rewards (booked per turn; the AEC ``rewards`` are their sums)
    Detection, ``detection_reward: paper``: ``1[v_i == u]`` (N/A, invalid: 0).
    ``shaped`` (public code): correct 2.49 (= 0.3*(2*1-1) + 1.2 + 0.99), wrong -1,
    N/A -0.5, unparseable -1; a spy voter gets -1 for voting itself, +0.2 for
    N/A, +0.5 for any other player.
    Performing, zero-sum: with m_j the valid votes received by player j, mc the
    mean over civilians and nc = n - 1: spy ``-beta*(m_u - mc)``, civilian j
    ``(beta/nc)*(m_u - mc) - lambda*(m_j - mc)``; they sum to exactly 0.
    Invalid turns additionally get ``invalid.penalty`` in penalty/retry mode.

Group keys
    ``episode``, ``phase``, ``role`` (spy | civilian | detector), ``source``.

Deviations from the paper, all deliberate
    * Prompts are our wording of the paper's description, not its verbatim text.
    * Voters see the ``Answer:`` part of each output, never the reasoning, so a
      spy's thinking cannot give it away; an unparseable output is shown as
      ``(no answer)``.
    * Paper-mode detection reward is applied literally to the spy's own vote
      (a spy voting for itself scores 1); the shaped mode has the code's rules.
    * The god detector is k detector seats voting once each (shared weights,
      one batched call) rather than one detector sampled k times.
    * ``vote_format: lenient`` and ``require_answer_line: false`` exist for models
      too small to follow the format at first (the CPU config uses them); the
      defaults are the paper's strict formats.
    * ``mask: fact`` (not the paper's; the default is its span): the spy's copy
      lacks ONE fact, a number drawn uniformly among the source's distinct
      numbers (else a name, a capitalised word not opening a sentence), replaced
      by ``mask_token`` at every occurrence; the rules tell the players so. A
      source with neither gets the span. For models that cannot tell answers
      written from a full and a span-masked copy apart: a missing or different
      number is a difference a small voter can check against its own copy.
      ``mask_ratio`` and ``mask_unit`` size a span and are refused with it.
    * The math source is the problem statement; the verifiable answer is only
      used for metrics (``civilian_correct``), never for rewards.

Version history
    v0: first release.
    v1: a vote is a plain ASCII index (``\\boxed{-0}``, ``\\boxed{+1}`` and non-ASCII
        digits are invalid, as the paper's format is an index 0..n-1); the masked
        span's length rounds exact halves up (float noise made 0.58 * 25 give 14);
        ``N.A.`` reads as N/A; a whitespace-only ``mask_token`` is a config error.
"""

from __future__ import annotations

from arena.games.spy.env import SpyGame, env
from arena.games.spy.types import SpyConfig, SpyObservation, SpyOptions

__all__ = ["SpyConfig", "SpyGame", "SpyObservation", "SpyOptions", "env"]
