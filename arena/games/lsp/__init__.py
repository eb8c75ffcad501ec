"""LSP: Language Self-Play, data-free training (``lsp_v0``).

After Kuba et al., "Language Self-Play For Data-Free Training" (arXiv
2509.07414, v3); the paper has no public code, so this docstring is the spec.
One episode is ONE query of the paper's Algorithm 1; a training step of N
games is the paper's step of N queries.

Seats
    ``challenger_0``; ``solver_0 .. solver_{G-1}`` (``n_solvers``, G); the referee:
    ``reward_0 .. reward_{G-1}`` when ``task_reward: reward_model`` and
    ``judge_0 .. judge_{G-1}`` when ``mode: lsp``. Challenger and solvers are
    meant for the shared trainable policy; ``reward_*`` for a reward-model policy
    (``kind: reward_model``), ``judge_*`` for the FROZEN initial model.

Episode
    1. ``challenge``: the challenger gets the challenger prompt with ``{task}``
       and ``{template}`` (``task`` / ``template``; empty = general instructions /
       free form) and writes one query between ``[Start Generation]`` and
       ``[End Generation]``. No query -> invalid: the game ends there, the reason
       is recorded (``info.no_query_reason``) and ``invalid`` decides the
       penalty (default: penalty mode, -1).
    2. ``solve`` (hidden): each solver gets the raw query as its only message
       (no system prompt) and answers; solvers never see each other.
    3. ``referee`` (hidden; played only when there is a reward model or
       ``mode: lsp``): ``reward_j`` reads (query as the user turn, answer j as
       the assistant turn) and replies with its score; ``judge_j`` reads the
       7-criteria prompt with the query and answer j and replies with a short
       justification, ``<Calculation>...</Calculation>`` and ``<Score>k</Score>``.

Action grammar
    challenge: ``query_format: strict`` (paper): the stripped text between the
    first ``[Start Generation]`` and the next ``[End Generation]``; ``lenient``
    also takes the text after a lone start marker, else the first non-empty
    line. Queries are cut to ``max_query_chars``. solve: any text is an answer.
    reward: ``float(text)``, finite, else unparseable. judge: k of the last
    ``<Score>k</Score>`` with k in 0..7; the closing tag may be missing at the
    very end (it is the judge's stop string, which generation cuts off);
    anything else is unparseable. Unparseable verdicts score
    ``unparseable_reward`` / ``unparseable_score`` (default 0); they are counted
    in ``rm_unparseable_rate`` / ``judge_unparseable_rate``, never as invalid
    turns, so they do not touch the solvers' invalid rate.

Rewards (booked per turn)
    ``R_j = R(q, a_j)``: the reward seat's score, or the verifier (below).
    ``V(q) = mean_j R_j``; LSP: ``R_Q,j`` in 0..7 and ``V_Q(q) = mean_j R_Q,j``.
    ``lsp_zero``: solver j gets ``R_j``, the challenger ``-V(q)``.
    ``lsp``: solver j gets ``R_j + R_Q,j``, the challenger ``-V(q) + V_Q(q)``
    (general-sum). Referee seats get nothing.

Training (``training_defaults``; the learner's registered pieces, no special case)
    ``solve``: estimator ``lsp_solver`` grouped by episode: ``R - V(q)`` (no std).
    ``challenge``: ``lsp_challenger``: reward minus the mean over the step's
    challenger turns = ``mean_i V(q_i) - V(q)``. Loss ``reinforce`` (ratio's
    denominator detached, no clipping), KL to the frozen reference with
    beta 0.05 on both roles; ``L = L_sol + alpha_ch * L_ch`` with alpha_ch the
    challenge phase's ``loss_weight``, each role's loss its OWN token mean
    (``learner.aggregate_per_phase: true``; false pools every token in one
    mean, which gave the challenger's loss weight 7/52 instead of 1 with 2
    queries x 5 solvers, 7 challenger and 45 solver tokens). Every sample is
    trained, zero-variance groups included (``drop_zero_variance: false``:
    dropping them would drop their KL term too, and with G = 1 every solver
    sample). lr 3e-6 and 8 games (queries) per step, the paper's. A config
    that omits these keys gets these values; ``lsp.yaml`` (CPU) overrides lr
    (1e-5) and games_per_step (4) to keep a few-step run short.

Metrics
    Per game: ``R`` (= V(q)), ``R_Q`` (= V_Q(q)), ``no_query``, ``query_words``,
    ``answer_words``, ``code_answer_share`` (share of answers whose lines are
    more than ``code_threshold`` code: fenced, or code-looking lines), the
    unparseable rates. Per step (``step_metrics``): ``query_distinct_n``
    (distinct ``ngram``-grams across the step's queries) and ``V_spread`` (std
    of V(q) over the step's queries, what the challenger's advantages are made of).

Choices the paper leaves open (ours)
    * G = 4 by default; alpha_ch = 1 (``loss_weight`` of ``challenge``).
    * One episode per query, so a step's N queries are N games.
    * Query-less challenger outputs: -1 by default (the paper does not say).

Deviations, all deliberate
    * Prompts are our wording of the paper's, not its verbatim text.
    * ``query_format: lenient`` exists for models too small to write the
      markers (the CPU config uses it); the default is the paper's strict form.
    * ``task_reward: verifier`` (``verifier: arithmetic``): the paper PROPOSES a
      verifier for tasks with checkable answers but does not demonstrate one.
      Ours reads the first integer expression with + - * (at most 4 operands of
      at most 6 digits) from the query; a query without one is invalid, like a
      query-less output. ``R = 1`` when the answer's final number (last
      ``\\boxed{}`` or last number) equals its value, else 0. ``lsp.yaml`` uses it
      on CPU, where no reward model can be downloaded and a 135M model as a
      generative judge of free-form answers gives little more than noise: with
      ``{template}`` asking for arithmetic, R is exact and cheap, the challenger
      is rewarded for harder problems, and R_Q still comes from the frozen model.
      ``lsp.paper.yaml`` keeps the reward model (Skywork-Reward-V2-Llama-3.2-3B).

    * ``challenger_prefix`` / ``judge_prefix`` (default empty, as in the paper;
      ``lsp.yaml`` sets both): the start of the challenger's / judge's reply is
      written for it as an open assistant message (``continue_final``), the
      model continues it, and the query / verdict is read from prefix + reply;
      only the model's own tokens are its completion (trained for the
      challenger). Measured reason (SmolLM2-135M-Instruct, runs/lsp of the
      previous session, 4 queries a step): with the paper's prompt alone 50-75%
      of challenger outputs held no checkable arithmetic (prose, the prompt
      echoed), and the judge never wrote ``<Score>k</Score>`` after its
      justification (judge_unparseable_rate 1.0), so R and R_Q were 0 and
      nothing could be learned. With ``challenger_prefix: "[Start
      Generation]\nWhat is"`` (a one-line query: the challenge phase stops at a
      newline) and ``judge_prefix: "<Score>"`` with at most 3 greedy tokens
      stopped at ``</`` or a newline, the judge's next token is its score: the
      7-criteria justification and the ``<Calculation>`` are skipped (the
      criteria stay in its prompt); R_Q stays an integer in 0..7 (anything
      else is unparseable). Measured with ``python scripts/lsp_probe.py
      games/lsp/lsp.yaml --games 8``: every challenger output held a checkable
      query (valid_query_rate 1.0, against 0.25-0.5 before), R_Q varied (mean
      3.06, spread 2.73) but 56% of judgements were unparseable, mostly a sum
      such as ``<Score>1+0``, and R was still 0: the solvers' last number was a
      restated operand ("7 + 5 = 12 (multiplication by 5)"). ``lsp.yaml``
      therefore also stops the judge at ``+`` (its first term is the score) and
      reads answers with ``final_answer: after_equals``; its first 6 training
      steps then had R 0-0.5 and R_Q 0.75-3.1 per step, judge_unparseable_rate
      0-0.25.
    * ``final_answer`` (default ``last``): ``after_equals`` reads the number
      after the first ``=`` ("7 + 5 = 12. To add 7 and 5" -> 12), for answers
      cut off by the token budget whose last number is a restated operand.

Version history
    v0: first release.
    v0, later: ``challenger_prefix`` and ``judge_prefix``, off by default (the v0
    game unchanged, hence no new version).
"""

from __future__ import annotations

from arena.games.lsp.env import LspGame, env
from arena.games.lsp.types import LspConfig, LspObservation

__all__ = ["LspConfig", "LspGame", "LspObservation", "env"]
