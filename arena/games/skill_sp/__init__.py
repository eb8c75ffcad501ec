"""Skill-SP (Skill Self-Play, PROTOCOLS.md §3): a proposer writes tasks from an evolving skill library,
frozen probes vouch for them, solvers learn from executing their answers against a hidden contract.

Version ``skill_sp_v1`` (history at the end). The authors' code is not public; this docstring is the spec and names every
choice and deviation.

**Seats and roles.** ``proposer`` (role proposer, trainable), ``probe_0 .. probe_{K-1}`` (role probe;
map them to a frozen policy, the paper's frozen solver; K = ``probes``, paper 10) and ``solver_0 ..
solver_{M-1}`` (role solver, trainable; M = ``solvers``).

**Episode.**

1. *Route* (``setup``). With probability ``exploration_share`` (1 - alpha, paper alpha = 0.5) the
   episode is in the skill-free exploration stream; else a skill is sampled from the library snapshot
   with probability proportional to its routing weight (``controller.py``). Options fix either.
2. *propose* (proposer). Sees the skill's description, rules, generation hints, tools and one example
   (task + contract), or, in exploration, only the tool list and the format. Writes one JSON object
   ``{"task": "<visible prompt>", "contract": {"answer": ..., ...}}``; a tool-use contract also has
   ``"calls"``, the reference tool calls. Grammar: the last JSON object in the text with a string
   ``task`` and an object ``contract`` holding ``answer``; else a parse failure (reward -1, episode
   ends). The contract is validated in the sandbox by the skill's ``validators.validate`` (exploration:
   ``exploration_validators.py``: reference calls must reproduce the answer, or a non-empty answer).
   Rejected: reward 0, episode ends.
3. *probe* (K probes, hidden). Each sees only the task (and, for tool-use tasks, the tool list and
   the call format) and answers with JSON. Each response is judged in the sandbox (concurrently, in a
   bounded pool) by ``judge.evaluate``: the validators' exact ``check`` and the answer it amounts to
   (a tool-use response's executed value, computed without the validators). ``v_solve`` = share of
   probes ``check`` accepts; a check that raises, times out or exits counts as not accepted. The task
   is *valid* iff the unique plurality of the probes' answers equals the contract's answer
   (``rules.probe_verdict``): every parsed probe's answer votes, whatever its check did; only an
   unparsed reply, or tool calls that fail, abstain. Proposer reward ``1[valid] * (1 - 2 |v_solve - 0.5|)``, booked on its
   propose turn. Not valid: episode ends.
4. *solve* (M solvers, hidden). Same view as the probes: the task alone (PROTOCOLS.md: the solver
   never sees skill text); with ``solver_sees_skill: true`` also the routed skill's name, description
   and rules (the reading ``pi_solver(action | observation, skill)``); never its hints, examples or
   contract, and no skill in the exploration stream or in held-out evaluation. Reward 1 if the checker accepts the
   response (executed against the contract), else 0.

**Cross-episode state** (``env.SkillState``, a :class:`~arena.core.game.GameState`): the
:class:`~arena.games.skill_sp.controller.SkillLibrary`. Envs read a frozen snapshot (active skills, weights,
packages). After each step it records every skill-stream episode's outcome (verified, solver-consistent,
frontier ``v_solve``, task shape), counts co-occurrence of the step's skills, evolves the library
(below), prunes, and reports ``weight/<skill>``, ``validity/<skill>``, ``library_size``, ``pruned``,
``induced``, ``induce_rejected``, ``refined``, ``refine_rejected`` and the graph's edge counts
(``graph/induced_from``, ``graph/refined_from``, ``graph/co_occurs``). Saved with checkpoints as
readable skill folders + ``graph.json`` + ``stats.json``.

**Training defaults.** GRPO on ``propose`` (one group per phase and role over the step) and, for
``solve``, the solver curriculum, the estimator ``skill_sp_curriculum`` (``arena/learners/estimators.py``;
the game names it in its training defaults and each episode's ``info["stream"]`` feeds it): the solver
turns of the top ``alpha*M`` skill-stream and top ``(1-alpha)*M`` exploration tasks of the step (``alpha*M``
rounded half up: alpha 0.5, M = 5 gives 3 skill tasks), ranked
by proposer reward, with GRPO per task; other solver turns are dropped. Probe turns are not trained.

**Library evolution** (``evolve.py``) runs after each step when ``evolution.policy`` names a policy
(the frozen base model): it induces skills from the step's best valid exploration tasks and refines
skills whose tasks all failed; a package enters only through the controller's structural, sandboxed
and novelty checks.

**Deviations.** PROTOCOLS.md §3 says the solver never sees skill text, which is our default; issue
#24's audit reads the paper's ``pi_solver(action | observation, skill)`` as showing it, which
``solver_sees_skill: true`` does (the two sources disagree; the default follows PROTOCOLS.md). The routing's frontier
rate ``s3`` counts only VALID tasks in the band (over all the skill's tasks): the paper does not say;
``controller.py`` gives the reason. Induction tries up to 20 exploration tasks per step by default
(``evolution.induce_per_step``; the paper induces about 20 skills per iteration; ``skill_sp.yaml``
keeps 1 on CPU). The library is a networkx graph (lineage and co-occurrence edges): beyond the paper. A
stream with fewer valid tasks than its curriculum quota does not pass the rest to the other (``fill:
true`` does; the paper does not say). Parse failures are game events with the rewards above: keep
``invalid.mode: na``. **Evaluation** (``mode: heldout``): no proposer or probes; the solvers answer held-out tasks, judged by
the same sandboxed checkers: the project's set (``heldout.py``, ``data/heldout.jsonl``: 24 tool-use and
logic tasks over every seed skill) or BFCL's ``simple_python`` tasks (``heldout_source: bfcl_simple``,
``bfcl.py``, data from the ``bfcl-eval`` package). ``python -m arena.eval`` reports ``game/solver_accuracy``
with a 95% interval; ``--compare-set`` puts a checkpoint against the base on the same tasks.
``train.evals`` logs the same held-out accuracy during training (``skill_sp.yaml``: step 0, every
checkpoint, the end). ``proposer_prefix`` (off by default; ``{"task": "`` in ``skill_sp.yaml``) opens
the proposer's reply with that written start, parsed with the reply: SmolLM2-135M wrote no parseable
proposal unprefixed (0 of 16 samples; 2 of 16 prefixed). **Not yet implemented:** routing that reads the graph's edges; loaders for API-Bank and ZebraLogic (none ships
in a registry package we found).

Version history
    v0: first release.
    v1: a probe whose check fails (raises, times out, exits) still votes with its answer; in v0 it
    abstained, so validators that failed on chosen answers chose the majority (issue 54).
"""

from arena.games.skill_sp.env import SkillSpGame, SkillState

__all__ = ["SkillSpGame", "SkillState"]
