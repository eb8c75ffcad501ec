"""Household: a multi-turn text agent game in ALFWorld's mould (``household_v0``).

Built for AUSO ("Action-Level Unified Skill Optimization from Internalization to
Utilization", arXiv 2608.21292; public code Action-Skill, a verl-agent fork),
which trains on ALFWorld. ALFWorld needs data downloads, so this is a
procedurally generated world with ALFWorld's task types, grammar and feedback.

World (``world.py``)
    One room per task: kitchen, living room, bedroom or bathroom, with 6-12
    numbered receptacles (``cabinet 2``; cabinets, drawers, the fridge, the
    microwave and safes open and close, starting closed) and 6-12 numbered
    objects in or on them. Objects can become hot, cold, clean or sliced; a
    desk lamp is lit by ``use``. Appliances: microwave (heat), fridge (cool),
    sink basin (clean). The agent stands at one receptacle and carries at most
    one object.

Tasks (``tasks.py``), ALFWorld's six types
    pick_and_place, examine (look at an object under a lit desk lamp, holding
    it), clean, heat, cool (then place), pick_two (two objects in/on one
    receptacle). In-domain: pick_and_place, clean, cool; held-out (never
    trained on, no task-specific skills): examine, heat, pick_two
    (``task_types``). A world id fixes the world and task; training worlds have
    even ids, evaluation worlds odd ids (``split: train | eval``), so training
    never sees an evaluation world. Every generated task is solvable: the
    planner (``planner.py``, breadth-first search) finds a plan within the
    step limit, checked by property tests.

Seats
    ``agent_0 .. agent_{G-1}`` (``attempts``, G = 8): G attempts at the SAME
    world, each on its own copy, so the episode gives the task's pass rate p.
    They never see each other.

Phases
    ``act`` (hidden), repeated: every attempt still playing acts once per
    occurrence, so all attempts' turns batch into one generate call (and
    across games). An attempt stops when it solves the task or after
    ``max_steps`` (30) actions; the episode ends when every attempt has stopped.

What a seat sees (``prompts.py``, the public code's prompt shape)
    The task; retrieved skills ("Retrieved relevant experience", ``skills``);
    the number of steps taken and the last ``history`` (2) observations with
    the actions taken; the current observation; the admissible actions; then
    the answer format.

Action grammar (``actions.py``)
    ``<think>...</think><action>A</action>``; A one of ALFWorld's commands:
    ``go to X``, ``take Y from X``, ``put Y in/on X`` (``in`` or ``on`` also
    read), ``open X``, ``close X``, ``heat Y with X``, ``cool Y with X``,
    ``clean Y with X``, ``slice Y with K``, ``use X``, ``examine X``,
    ``look``, ``inventory``. The last ``<action>`` counts; it must be admissible
    now. No action tag, a missing ``<think>`` (``require_think``) or an
    inadmissible action is invalid: the world answers "Nothing happens.", the
    step counts, and the turn gets ``invalid.penalty`` (-0.1, public code).

Rewards
    1 on the turn that achieves the goal (the attempt then stops); invalid
    turns -0.1. A seat's return is 1 - 0.1 x (its invalid turns) if it solved
    the task, else -0.1 x (its invalid turns). Default training: trajectory
    credit, GRPO over the episode's G attempts: each attempt counts ONCE in
    its group's mean and std (``trajectory_stats: attempt``, the default), and
    every turn of an attempt gets the attempt's advantage. Two attempts of 5
    and 21 turns with returns -0.3 and 0 get -1 and +1. KL to the reference
    0.01 with the k3 estimator (public code; the learner's own default 0.001
    is SpyRL's). With AUSO (``household.auso.yaml``, ``household.paper.yaml``):
    ``auso_distill`` has coefficient 0.1 and the public code's length-cap rule
    (skip the term when over 5% of responses hit the cap or their mean length
    exceeds 0.4 of it; ``length_cap: auto`` = the policy's max_new_tokens) when
    the config omits them; ``household.auso.yaml`` switches the rule off for its
    12-token replies (see its comment).

Skills (``skills/``) and AUSO's probes
    General principles, common mistakes and task-specific skills (in-domain
    types only), as context text. The student prompt gets the top k = 3
    task-specific skills for the task description, by BM25 (``skills.retriever:
    bm25``, the default) or by embeddings (``skills.retriever: embedding``): the
    cosine of L2-normalised, mean-pooled last hidden states of
    ``skills.embedding_model`` (a built-in name, local folder or hub id of any HF
    encoder or decoder; default the built-in ``smollm2-135m``), skill embeddings
    computed once per (library, model), deterministic (``skills/__init__.py``). With
    ``skills.probes`` every turn also records the teacher context (all skills)
    and the no-skill context for the same state (``Turn.probes``), which the
    learner scores with forward passes only.

Metrics
    success_rate (p), success/<task type>, out_of_steps_rate, steps,
    invalid_rate.

Deviations from ALFWorld / the public code
    * A procedural world, not ALFRED scenes; the object and receptacle
      vocabulary is ALFWorld's, the physics simpler (any object fits any
      receptacle; heating, cooling and cleaning need only the appliance).
    * Inadmissible actions are invalid (penalised) rather than a silent
      "Nothing happens."; the public code penalises format errors only.
    * An attempt that runs out of steps is recorded per seat (status
      ``out_of_steps``, metric out_of_steps_rate, ``info["out_of_steps"]``):
      the episode's own truncation flag is episode-wide, so the episode ends
      as a termination once all G attempts have stopped.
    * Skills are retrieved by BM25 by default; the public code uses a sentence-
      embedding model. The ``embedding`` option embeds with whatever local model
      ``skills.embedding_model`` names, by default the built-in decoder
      SmolLM2-135M-Instruct mean-pooled (no hub downloads here), not a model
      trained for sentence embeddings, so its rankings are not the public code's.
    * CPU switches, off by default, on in household.yaml and household.auso.yaml
      (measured: SmolLM2-135M wrote no admissible action in 8 of 8 held-out games
      as configured before, invalid_rate 1.0, and 0 of 16 samples even with the
      reply opened by ``<action>``): ``action_prefix`` opens every reply (and the
      probes' contexts) with ``<action>``, and ``action_match: nearest`` maps a
      non-admissible action to the admissible one sharing the most words
      (``actions.nearest_action``, counted in ``approximate_rate``); with both,
      27% of turns act and 73% stay invalid (4 held-out games).

    * ``trajectory_stats: turn`` (not the default) counts each TURN in the group
      statistics, as verl-agent's per-step GRPO does: a long attempt weighs
      more (the example above gives -2.05 / +0.49). Before issue #24 this was
      the only behaviour.

Version history
    v0: first release; the ``skills.retriever: embedding`` option added later
    (the default, BM25, unchanged).
"""

from __future__ import annotations

from arena.games.household.env import HouseholdGame, env
from arena.games.household.types import HouseholdConfig, HouseholdObservation, HouseholdOptions

__all__ = ["HouseholdConfig", "HouseholdGame", "HouseholdObservation", "HouseholdOptions", "env"]
