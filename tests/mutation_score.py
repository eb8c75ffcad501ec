"""Mutation score per module from mutmut's results (``make mutation`` runs this after ``mutmut run``).

Reads ``mutants/**/*.py.meta`` (mutmut 3's result files) and prints, per covered
module: mutants, killed, survived, no tests, timeouts, and the score
``killed / (mutants - equivalent)``. Mutants judged equivalent (no test can tell
them apart; each is argued in ``bench/MUTATION.md``) are listed in
``EQUIVALENT`` below and left out of the denominator; a listed mutant that is
killed after all is reported so the list stays honest.

    python tests/mutation_score.py            # the table
    python tests/mutation_score.py --survivors  # also the surviving mutants' names
    python tests/mutation_score.py --min 90     # exit 1 when a module scores below 90%

Only the functions named in ``SCOPE`` count: of ``arena/core/game.py``, the phase and
invalid-output logic; of ``arena/games/skill_sp/controller.py``, the maths and the library's
routing, pruning and induction (not its save/load); of ``arena/learners/auso.py``, all but
``AusoDistill.loss`` (it needs a model's forward pass; ``test_auso_registered.py`` checks
it against a reference loop with a tiny model, too slow per mutant); of
``arena/games/household/tasks.py``, the success check and the world-id split.

Module paths after the options restrict the table (and ``--patterns``) to those modules:

    python tests/mutation_score.py --min 90 arena/games/lsp/rules.py arena/learners/auso.py
    python tests/mutation_score.py --patterns arena/games/lsp/rules.py | xargs -d '\n' mutmut run
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module -> mutant-name patterns that count (mutmut names: ``module.x_func__mutmut_N``,
#: ``module.xǁClassǁmethod__mutmut_N``).
GAME_FUNCTIONS = (
    "step", "_on_invalid", "_advance_phase", "_enter", "outputs", "credit", "credit_phase",
    "pending_seats", "_render_prompt", "prompt", "truncate", "_record",
)
SCOPE: dict[str, tuple[str, ...]] = {
    "arena/games/spy/rules.py": ("arena.games.spy.rules.*",),
    "arena/core/game.py": tuple(f"arena.core.game.xǁLLMGameǁ{f}__mutmut_*" for f in GAME_FUNCTIONS),
    "arena/learners/advantages.py": ("arena.learners.advantages.*",),
    "arena/learners/estimators.py": ("arena.learners.estimators.*",),
    "arena/learners/losses.py": ("arena.learners.losses.*",),
    "arena/learners/samples.py": ("arena.learners.samples.*",),
    "arena/learners/schedule.py": ("arena.learners.schedule.*",),
    "arena/learners/auso_maths.py": tuple(
        f"arena.learners.auso_maths.{f}__mutmut_*" for f in (
            "x_smooth", "x_stage_weights", "x_topk_tail", "x_topk_jsd", "x_action_mean", "x_pass_gate", "x__zscore",
            "x_centred_tanh", "x_utilisation_weights", "x_internalisation_weights", "x_distill_allowed",
        )
    ),
    "arena/learners/auso.py": tuple(
        f"arena.learners.auso.{f}__mutmut_*" for f in (
            "x_probe_bins", "xǁAusoDistillǁ__init__", "xǁAusoDistillǁactive_at", "xǁAusoDistillǁ_selected", "xǁAusoDistillǁ_allowed",
            "xǁAusoUtiliseǁ*",
        )
    ),
    "arena/games/lsp/rules.py": ("arena.games.lsp.rules.*",),
    "arena/games/skill_sp/rules.py": ("arena.games.skill_sp.rules.*",),
    "arena/games/skill_sp/controller.py": tuple(
        f"arena.games.skill_sp.controller.{f}__mutmut_*" for f in (
            "x_beta_rate", "x_quality", "x_exploration_bonus", "x_routing_weight", "x_proposer_reward", "x_task_shape",
            "x__words", "x_jaccard", "x_should_prune", "x_weights_table", "xǁSkillStatsǁ*", *(
                f"xǁSkillLibraryǁ{m}" for m in ("__init__", "_add", "active", "weights", "route", "record", "co_occur",
                                                "prune", "novelty_problem", "induce", "refine", "next_iteration", "report")
            ),
        )
    ),
    "arena/games/household/world.py": ("arena.games.household.world.*",),
    "arena/games/household/tasks.py": ("arena.games.household.tasks.x_satisfied__mutmut_*", "arena.games.household.tasks.x_draw_world_id__mutmut_*"),
    "arena/games/household/actions.py": ("arena.games.household.actions.*",),
    # The exact yardstick (#34): the pure parts the fast tests reach (arena/loop/exact.py imports them from
    # arena/policies/choices.py, which plays them in action_mode: score), and the draw among choices on hand-built
    # scores (tests/policies/test_choices_draw.py, #53); model_action_probs needs a model.
    "arena/policies/choices.py": tuple(f"arena.policies.choices.x_{f}__mutmut_*" for f in (
        "normalise", "action_ids", "draw", "choose")),
    # Held-out seeds and bootstrap intervals (#53), against binomial percentiles by hand and reference loops
    # (tests/arena/test_heldout_values.py); per_episode and summarise read whole episodes (tests/arena/test_eval.py).
    "arena/stats/heldout.py": tuple(f"arena.stats.heldout.x_{f}__mutmut_*" for f in (
        "held_out_seeds", "bootstrap", "bootstrap_difference")),
    # The seat's view in words (#51: Leduc's card, public card and betting), against every information state
    # (tests/games/test_openspiel_leduc_view.py) and hand-played histories.
    "arena/games/openspiel/rules.py": tuple(f"arena.games.openspiel.rules.x_{f}__mutmut_*" for f in (
        "describe", "card_and_view", "kuhn_parts", "leduc_rank", "leduc_parts", "card_parts")),
    # The exact layer (issue #52 moved it out of arena/games/openspiel/exact.py and descent.py, now shims).
    "arena/exact/descent.py": ("arena.exact.descent.*",),
    "arena/exact/best_response.py": ("arena.exact.best_response.*",),
    "arena/exact/values.py": ("arena.exact.values.*",),
    "arena/exact/average.py": ("arena.exact.average.*",),
    "arena/learners/progress.py": ("arena.learners.progress.x_scheduled_lr__mutmut_*",),
    "arena/learners/clip.py": ("arena.learners.clip.*",),
    # Issue #51's switches: the regularisers' formulas, the magnet (its weights, moves, anneal and state, through a
    # tiny model), the start-up check, and the tabular MMD reference (tests/learners/test_magnet*.py,
    # test_entropy_terms.py, test_trust_region.py, test_obs_baseline.py).
    "arena/learners/regularisers.py": ("arena.learners.regularisers.*",),
    "arena/learners/magnet.py": ("arena.learners.magnet.*",),
    "arena/learners/checks.py": ("arena.learners.checks.*",),
    "arena/algorithms/mmd.py": ("arena.algorithms.mmd.*",),
    "arena/loop/components/warm_start.py": ("arena.loop.components.warm_start.x_threshold__mutmut_*", "arena.loop.components.warm_start.x_episode_turns__mutmut_*"),
    # The whitening solve and its sketch (tests/learners/test_whiten.py), the average policy's reservoir and
    # records (tests/learners/test_average_target.py).
    "arena/learners/whiten.py": ("arena.learners.whiten.x_solve__mutmut_*", "arena.learners.whiten.xǁSketcherǁ*"),
    "arena/loop/components/average.py": tuple(f"arena.loop.components.average.x_{f}__mutmut_*" for f in (
        "reservoir_add", "turn_record", "record_sample")),
    "arena/loop/components/stop.py": tuple(f"arena.loop.components.stop.{f}__mutmut_*" for f in (
        "x_track_best", "x_evals_since_best", "x_decide", "xǁStopWatchǁ__init__", "xǁStopWatchǁadd", "xǁStopWatchǁupdate")),
    # The chosen tokens' log-probs a slice of the head at a time, values and gradients (tests/learners/test_head.py).
    "arena/learners/head.py": ("arena.learners.head.*",),
}

#: Surviving mutants judged equivalent; the reason for each is in bench/MUTATION.md.
EQUIVALENT: set[str] = {
    # heldout.py: np.asarray's dtype float -> None/absent (the values are floats, and int rows average to the same
    # floats), and rng.integers(0, n, ...) -> rng.integers(n, ...) (low defaults to 0: the same draws).
    *(f"arena.stats.heldout.x_bootstrap__mutmut_{i}" for i in (5, 7, 15)),
    *(f"arena.stats.heldout.x_bootstrap_difference__mutmut_{i}" for i in (6, 8, 10, 12, 29, 39)),
    # choose: finish_reason="stop" dropped: Completion's default is "stop". draw: u < total -> u <= total differs
    # only when a double in [0, 1) equals a running sum exactly (no seed draws one).
    "arena.policies.choices.x_choose__mutmut_46",
    "arena.policies.choices.x_draw__mutmut_9",
    # descent.py: np.asarray's dtype float -> None/absent (the inputs are floats already), zip's strict=True ->
    # None/False/absent (the lengths are equal by construction), and in bounded a > 0 -> a >= 0, a < 0 -> a <= 0
    # (an advantage of 0 maps to 0 either way).
    *(f"arena.exact.descent.x_action_advantages__mutmut_{i}" for i in (3, 5, 7, 9, 18, 21, 22)),
    *(f"arena.exact.descent.x_natural_advantages__mutmut_{i}" for i in (3, 5, 7, 9)),
    *(f"arena.exact.descent.x_bounded__mutmut_{i}" for i in (6, 12, 18, 21, 22)),
    # parse_action's match default "exact" -> any other string: every value but "nearest" reads exactly.
    "arena.games.household.actions.x_parse_action__mutmut_2",
    "arena.games.household.actions.x_parse_action__mutmut_3",
    # no tag in nearest mode: the action "starts" at 1 instead of 0; no <think>...</think> fits before either.
    "arena.games.household.actions.x__action_text__mutmut_29",
    # normalise: rstrip(".") -> rstrip("XX.XX") runs after lower(), so no "X" is left to strip.
    "arena.games.household.actions.x_normalise__mutmut_12",
    # clipped_step: scale > 1 -> >= 1: a grad_scale of exactly 1 divides every gradient by 1, which changes nothing.
    "arena.learners.clip.x_clipped_step__mutmut_12",
    # kl_penalty's default "k3" -> "XXk3XX" / "K3": every value but "k1" selects k3.
    "arena.learners.losses.x_kl_penalty__mutmut_1",
    "arena.learners.losses.x_kl_penalty__mutmut_2",
    # .sum(-1) -> .sum(+1) on the documented (B, T) tensors: the same dimension.
    "arena.learners.losses.x_aggregate__mutmut_18",
    "arena.learners.losses.x_aggregate__mutmut_22",
    "arena.learners.losses.x_aggregation_weights__mutmut_20",
    "arena.learners.losses.x_normalise_choices__mutmut_4",
    "arena.learners.losses.x_normalise_choices__mutmut_32",
    # normalise_choices: alt_sums.to(own.dtype) -> .to(None): the sums already have logp's dtype in every caller.
    "arena.learners.losses.x_normalise_choices__mutmut_24",
    # choice_entropy: alt_sums.to(own.dtype) -> .to(None): the same, for the same reason.
    "arena.learners.losses.x_choice_entropy__mutmut_22",
    # average_metrics: np.asarray(rows, dtype=float) -> dtype=None / no dtype: every caller's tables are float
    # arrays already (played_array; the checkpoint's lists are read back as float), and 0/1 integer rows average
    # to the same floats.
    "arena.exact.average.x_average_metrics__mutmut_7",
    "arena.exact.average.x_average_metrics__mutmut_9",
    # grpo(..., scale=False) -> scale=None: both falsy.
    "arena.learners.advantages.x_lsp_solver__mutmut_3",
    # super().update(metrics) -> super().update(None): the base update ignores its argument.
    "arena.learners.schedule.xǁCycleScheduleǁupdate__mutmut_1",
    "arena.learners.schedule.xǁHysteresisScheduleǁupdate__mutmut_1",
    # truncate(): self._queue = [] -> None: a finished game never reads its queue
    # (pending_seats and step check `done` first).
    "arena.core.game.xǁLLMGameǁtruncate__mutmut_4",
    # uses.get(name, 0) -> uses.get(name, 1): an unknown name gives 0 or 1, both <= 1.
    "arena.learners.estimators.xǁEstimatorStatesǁmetrics__mutmut_29",
    # 0.3 * (2 * fmt_ok - 1) -> 0.3 / (...): fmt_ok is always 1 there, so both are 0.3.
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_21",
    # torch.tensor(ints, dtype=torch.long) -> dtype None / no dtype: Python ints infer int64.
    "arena.learners.advantages.x_group_index__mutmut_14",
    "arena.learners.advantages.x_group_index__mutmut_16",
    # n_groups + 2, or 1 group for an empty batch: the extra group is never indexed.
    "arena.learners.advantages.x_group_mean_std__mutmut_6",
    "arena.learners.advantages.x_group_mean_std__mutmut_7",
    # torch.unique(sorted=True) -> default / sorted=False: on CPU torch returns sorted values either way.
    "arena.learners.advantages.x_role_advantages__mutmut_12",
    "arena.learners.advantages.x_role_advantages__mutmut_13",
    # zip(turns, games, strict=True) -> strict None/False/absent: both lists are built together.
    "arena.learners.samples.x_credited_rewards__mutmut_11",
    "arena.learners.samples.x_credited_rewards__mutmut_14",
    "arena.learners.samples.x_credited_rewards__mutmut_15",
    # register_rule runs at import, before mutmut switches a mutant on: unreachable at test time.
    "arena.learners.schedule.x_register_rule__mutmut_1",
    "arena.learners.schedule.x_register_rule__mutmut_2",
    "arena.learners.schedule.x_register_rule__mutmut_3",
    # The shaped reward's correct-vote branch has fmt_ok = acc = 1, so rewriting a product
    # as a quotient (2*1 vs 2/1, 1.2*1 vs 1.2/1, 0.99*1 vs 0.99/1) or its acc > 0 test
    # (>= 0, `or True`, else 1.0) leaves 2.49.
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_24",
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_27",
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_29",
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_32",
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_34",
    "arena.games.spy.rules.x_detection_reward_shaped__mutmut_36",
    # mask_span's unit default "words" -> any other string: every unit but "chars" masks words.
    "arena.games.spy.rules.x_mask_span__mutmut_1",
    "arena.games.spy.rules.x_mask_span__mutmut_2",
    # round(x, 9) -> round(x, 10): both remove the float noise below a half.
    "arena.games.spy.rules.x_span_length__mutmut_18",
    # spy_caught: top > 0 -> top >= 0: with no votes every player ties at 0 (n >= 3), never unique.
    "arena.games.spy.rules.x_spy_caught__mutmut_5",
    # outputs(): a phase never opened gets latest 0 instead of -1, and the last fallback
    # .get((phase, index), {}) -> .get(None, {}): both reach only keys that are not stored.
    "arena.core.game.xǁLLMGameǁoutputs__mutmut_7",
    "arena.core.game.xǁLLMGameǁoutputs__mutmut_25",
    # A finished game's queue: [] -> None is never read (pending_seats and step check `done`).
    "arena.core.game.xǁLLMGameǁ_advance_phase__mutmut_14",
    # getattr(config, "max_turns", None) -> no default: every game config is a GameConfig,
    # which has max_turns.
    "arena.core.game.xǁLLMGameǁstep__mutmut_62",
    # A str action goes through str(action) instead of being used as is: the same string.
    "arena.core.game.xǁLLMGameǁstep__mutmut_8",
    # role_advantages' order default "paper" -> "XXpaperXX" / "PAPER": every order but
    # "code" and "spiral" reads the baseline before the update, as "paper" does.
    "arena.learners.advantages.x_role_advantages__mutmut_2",
    "arena.learners.advantages.x_role_advantages__mutmut_3",
    # --- LSP rules
    # challenger_reward: `r_q is not None` -> `... or True`: mean(None) is 0.0, the else branch's value.
    "arena.games.lsp.rules.x_challenger_reward__mutmut_5",
    # distinct_n: lower() -> upper(): either folds case.
    "arena.games.lsp.rules.x_distinct_n__mutmut_5",
    # code_share appends None instead of the line: only len(lines) is read.
    "arena.games.lsp.rules.x_code_share__mutmut_11",
    # extract_query's fmt default "strict" -> "XXstrictXX" / "STRICT": every fmt but "lenient" is strict.
    "arena.games.lsp.rules.x_extract_query__mutmut_1",
    "arena.games.lsp.rules.x_extract_query__mutmut_2",
    # final_number without a box: "" -> "XXXX": neither holds a number, so the whole answer is read next.
    "arena.games.lsp.rules.x_final_number__mutmut_12",
    # --- Skill-SP rules
    # proposal_reward's unparsed branch, proposer_reward(False, False, 0.0): with parsed falsy (False
    # or None) it is -1 whatever valid and v_solve (in [0, 1]) are.
    "arena.games.skill_sp.rules.x_proposal_reward__mutmut_2",
    "arena.games.skill_sp.rules.x_proposal_reward__mutmut_3",
    "arena.games.skill_sp.rules.x_proposal_reward__mutmut_9",
    "arena.games.skill_sp.rules.x_proposal_reward__mutmut_10",
    # the solver curriculum (arena/learners/estimators.py top_per_stream, moved from arena/games/skill_sp/rules.py)
    # with fill: spare > 0 -> spare >= 0: with no spare the slice is the quota's, unchanged.
    "arena.learners.estimators.x_top_per_stream__mutmut_33",
    # probe_verdict: counts.get(key, 1) + 1 / counts.get(key, 0) + 2: every count shifted by one /
    # doubled, so the ranking, the ties and the argmax are the same.
    "arena.games.skill_sp.rules.x_probe_verdict__mutmut_18",
    "arena.games.skill_sp.rules.x_probe_verdict__mutmut_19",
    # --- Skill-SP controller
    # task_shape: json.dumps sort_keys True -> None / False / absent: shape() builds every dict from
    # sorted(items()), so the insertion order is already sorted.
    "arena.games.skill_sp.controller.x_task_shape__mutmut_10",
    "arena.games.skill_sp.controller.x_task_shape__mutmut_12",
    "arena.games.skill_sp.controller.x_task_shape__mutmut_14",
    # SkillStats.record clips the proposer reward to [0, 1]; an upper clip of 2 never binds (r <= 1).
    "arena.games.skill_sp.controller.xǁSkillStatsǁrecord__mutmut_45",
    # jaccard: `if a | b` -> `if a & b`: for disjoint sets both give 0.
    "arena.games.skill_sp.controller.x_jaccard__mutmut_4",
    # weights_table: `or 1.0` -> `or 2.0`: weights are positive, so the sum is 0 only for an empty table.
    "arena.games.skill_sp.controller.x_weights_table__mutmut_5",
    # route: k <= 0 -> k < 0: k = 0 reaches rng.choice(size=0), which returns and draws nothing.
    "arena.games.skill_sp.controller.xǁSkillLibraryǁroute__mutmut_4",
    # --- household world
    # World.key sorts where.items(), whose first elements are distinct object names: the sort never
    # compares the receptacle, so any key on it (or none) gives the same order.
    "arena.games.household.world.x__none_last__mutmut_2",
    "arena.games.household.world.x__none_last__mutmut_4",
    "arena.games.household.world.xǁWorldǁkey__mutmut_4",
    "arena.games.household.world.xǁWorldǁkey__mutmut_6",
    # generate: sorting the objects of one receptacle by (its kind, name) instead of (kind, name):
    # the kind is then equal, and a name's text order already follows its kind (a kind that is a
    # prefix of another is followed by a space, which sorts before any letter).
    "arena.games.household.world.x_generate__mutmut_106",
    # generate's receptacle order (kind, copy number): every kind is one word and copy numbers are
    # 1 to 4, so sorting the names as text (no key), or splitting them another way, gives the same.
    "arena.games.household.world.x_generate__mutmut_45",
    "arena.games.household.world.x_generate__mutmut_47",
    "arena.games.household.world.x_generate__mutmut_51",
    "arena.games.household.world.x_generate__mutmut_54",
    "arena.games.household.world.x_generate__mutmut_55",
    "arena.games.household.world.x_generate__mutmut_57",
    # --- AUSO
    # AusoDistill._allowed passes max_capped=1.0 to distill_allowed; 2.0: a share is at most 1 either way.
    "arena.learners.auso.xǁAusoDistillǁ_allowed__mutmut_23",
    # action_mean: .sum(-1) -> .sum(+1) on the documented (N, T) tensors: the same dimension.
    "arena.learners.auso.x_action_mean__mutmut_4",
    "arena.learners.auso.x_action_mean__mutmut_8",
    # float("-inf") -> float("-INF"): the same value.
    "arena.learners.auso.x_probe_bins__mutmut_38",
    "arena.learners.auso.x_topk_tail__mutmut_40",
    # centred_tanh: top > eps -> top >= eps: top is the largest |m| of tanh values of z-scores with
    # standard deviation 1 (then top is far above eps) or all 0 (spread below eps), never near eps.
    "arena.learners.auso.x_centred_tanh__mutmut_68",
    # q.topk(k, dim=-1) -> q.topk(k): the default dimension is -1.
    "arena.learners.auso.x_topk_tail__mutmut_14",
    # _zscore: n_groups + 2, or 1 group for an empty batch: the extra group is never indexed.
    "arena.learners.auso.x__zscore__mutmut_6",
    "arena.learners.auso.x__zscore__mutmut_7",
    # A sample without the probe (NaN value) is alone in its group, so its m is 0 and its weight 1
    # whatever pass rate (its own, 1.0) or filled value (nan_to_num(None) = 0.0, 1.0) it gets.
    "arena.learners.auso.xǁAusoUtiliseǁaction_weights__mutmut_35",
    "arena.learners.auso.xǁAusoUtiliseǁaction_weights__mutmut_44",
    "arena.learners.auso.xǁAusoUtiliseǁaction_weights__mutmut_58",
    "arena.learners.auso.xǁAusoUtiliseǁaction_weights__mutmut_59",
    # A missing pass_rate 0.0 -> 1.0: the gate 4p(1-p) is 0 at both.
    "arena.learners.auso.xǁAusoUtiliseǁaction_weights__mutmut_43",
    # --- the exact yardstick (#34)
    # action_ids: encode(text, add_special_tokens=False) -> True / the default: SmolLM2's tokenizer adds
    # no special token to a plain encode.
    "arena.policies.choices.x_action_ids__mutmut_6",
    "arena.policies.choices.x_action_ids__mutmut_7",
    # kuhn_parts: set(raw[1:]) -> set(raw[2:]) / set("XXpbXX"): a Kuhn information state is a card digit and
    # p/b moves, so both tests agree on every string OpenSpiel writes.
    "arena.games.openspiel.rules.x_kuhn_parts__mutmut_10",
    "arena.games.openspiel.rules.x_kuhn_parts__mutmut_13",
    # average_policy: the weights are normalised (w / w.sum()), so a default of 1.0 * K or 2.0 / K per
    # policy, or an int dtype, gives the same w; einsum subscripts in upper case are the same contraction.
    *(f"arena.exact.average.x_average_policy__mutmut_{i}" for i in (8, 9, 12, 14, 44, 55, 64)),
    # expected_results: p > 0 -> p >= 0 also walks branches of probability 0, which add 0; the returns and
    # the sum are floats whatever dtype asarray is given.
    *(f"arena.exact.values.x_expected_results__mutmut_{i}" for i in (3, 5, 21, 24, 26)),
    # tabular_policy: probabilities are floats with or without dtype=float; |sum - 1| > 1e-6 -> >= 1e-6
    # differs only at exactly 1e-6, which no float sum of the tests' answers hits.
    *(f"arena.exact.tree.x_tabular_policy__mutmut_{i}" for i in (45, 47, 59)),
    # count_info_states: a chance node's legal_actions() are its chance outcomes' actions.
    "arena.exact.tree.x_count_info_states__mutmut_25",
    # whiten's Sketcher: the signs' dtype (int8 -> int64: the same +-1 after * 2 - 1) and randint(2, ...) (low
    # defaults to 0); the step counter's start (only differences of steps are read); zip's strict (the signs are
    # made from the params, so the lengths are equal); v / sign (sign is +-1, so the same as v * sign). solve:
    # K.shape[1] for K.shape[0] (K is square).
    *(f"arena.learners.whiten.xǁSketcherǁ__init____mutmut_{i}" for i in (12, 13, 17, 24)),
    *(f"arena.learners.whiten.xǁSketcherǁ__call____mutmut_{i}" for i in (10, 13, 14, 21)),
    "arena.learners.whiten.x_solve__mutmut_2",
    # descent_targets: its default arguments (weighting "policy", bound 0.0) mutated. mutmut's trampoline keeps the
    # original signature and hands the mutant the original's defaults, so a mutated default never runs.
    *(f"arena.exact.descent.x_descent_targets__mutmut_{i}" for i in (1, 2, 3)),
    # stop.decide: track_best reads every mode but "min" as max, so "max" -> "XXmaxXX" / "MAX" is the same.
    "arena.loop.components.stop.x_decide__mutmut_48",
    "arena.loop.components.stop.x_decide__mutmut_49",
}

#: Mutants that only a test needing the bubblewrap sandbox can reach (it costs seconds per
#: mutant, so the mutation run leaves those tests out): not equivalent, not counted, listed
#: in bench/MUTATION.md. tests/games/test_skill_sp_controller.py's sandbox test exercises this code.
SANDBOX_ONLY: set[str] = {
    # SkillLibrary.induce with a pool: the loop over the sandbox's verdicts on the package's own examples.
    *(f"arena.games.skill_sp.controller.xǁSkillLibraryǁinduce__mutmut_{i}" for i in range(12, 20)),
}

KILLED = {1, 3, 37}  # pytest failed / internal error / caught by type check
SURVIVED = {0}
NO_TESTS = {5, 33}
TIMEOUT = {24, -24, 36, 152, 255}


def _modules(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in SCOPE]
    if unknown:
        sys.exit(f"not a covered module: {', '.join(unknown)} (covered: {', '.join(SCOPE)})")
    return names or list(SCOPE)


def patterns(modules: list[str] | None = None) -> list[str]:
    """The patterns of ``modules`` (default all), for ``mutmut run`` (so only the counted mutants are run)."""
    return [p for m in _modules(modules or []) for p in SCOPE[m]]


def results(modules: list[str] | None = None) -> dict[str, dict[str, int | None]]:
    out = {}
    for module in _modules(modules or []):
        pats = SCOPE[module]
        meta = ROOT / "mutants" / f"{module}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        out[module] = {k: v for k, v in codes.items() if any(fnmatch.fnmatch(k, p) for p in pats)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--survivors", action="store_true", help="list surviving (and untested) mutants")
    ap.add_argument("--min", type=float, default=None, help="exit 1 when a module's score is below this percent")
    ap.add_argument("modules", nargs="*", help="only these covered modules (default: all)")
    args = ap.parse_args()
    rows, failing, stray = [], [], []
    header = f"{'module':29} {'mutants':>7} {'killed':>6} {'survived':>8} {'equiv':>5} {'sandbox':>7} {'no test':>7} {'timeout':>7} {'unrun':>5} {'score':>7}"
    for module, codes in results(args.modules).items():
        c = Counter()
        for key, code in codes.items():
            if key in EQUIVALENT:
                c["equiv"] += 1
                if code in KILLED:
                    stray.append(key)
            elif key in SANDBOX_ONLY:
                c["sandbox"] += 1
            elif code in KILLED:
                c["killed"] += 1
            elif code in SURVIVED:
                c["survived"] += 1
            elif code in NO_TESTS:
                c["no_tests"] += 1
            elif code in TIMEOUT:
                c["timeout"] += 1
            elif code is None:
                c["unrun"] += 1
            else:
                c["other"] += 1
        counted = len(codes) - c["equiv"] - c["sandbox"] - c["unrun"]
        # A timeout means the mutant hung the tests: detected, so it counts as killed.
        score = 100.0 * (c["killed"] + c["timeout"]) / counted if counted else float("nan")
        rows.append(
            f"{module:29} {len(codes):7d} {c['killed']:6d} {c['survived']:8d} {c['equiv']:5d} {c['sandbox']:7d} "
            f"{c['no_tests']:7d} {c['timeout']:7d} {c['unrun']:5d} {score:6.1f}%"
        )
        if args.min is not None and not score >= args.min:
            failing.append(module)
        if args.survivors:
            for key, code in sorted(codes.items()):
                if key not in EQUIVALENT | SANDBOX_ONLY and (code in SURVIVED or code in NO_TESTS):
                    rows.append(f"    {'survived' if code in SURVIVED else 'no tests'}: {key}")
    print(header)
    print("\n".join(rows))
    print("score = (killed + timeout) / (mutants - equivalent - sandbox - unrun); `mutmut show NAME` prints a mutant's diff")
    if stray:
        print("listed as equivalent but killed (remove from EQUIVALENT):", ", ".join(stray))
    if failing:
        print(f"below {args.min}%: {', '.join(failing)}")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--patterns":
        print("\n".join(patterns(sys.argv[2:])))
        sys.exit(0)
    sys.exit(main())
