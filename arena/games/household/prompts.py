"""The household prompt, in the shape of AUSO's public code (after verl-agent's ALFWorld template).

The task; skills as "Retrieved relevant experience" when there are any; how many
steps were taken and the most recent observations with the actions taken; the
current observation; the admissible actions; then the answer format
``<think>...</think>`` followed by ``<action>...</action>``. One user message.
"""

from __future__ import annotations

from arena.core.types import ChatMessage
from arena.games.household.types import HouseholdObservation

FORMAT = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed "
    "within <think> </think> tags.\n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags."
)


def _skills(skills: tuple[str, ...]) -> str:
    if not skills:
        return ""
    return "Retrieved relevant experience:\n" + "\n".join(f"- {s}" for s in skills) + "\n\n"


def _history(obs: HouseholdObservation) -> str:
    if obs.step == 0:
        return ""
    shown = len(obs.history)
    first = obs.step - shown + 1
    pairs = "\n".join(
        f"[Observation {first + i}: '{o}', Action {first + i}: '{a}']" for i, (o, a) in enumerate(obs.history)
    )
    return (f"Prior to this step, you have already taken {obs.step} step(s). Below are the most recent {shown} "
            f"observations and the corresponding actions you took:\n{pairs}\n")


def render(obs: HouseholdObservation, prefix: str = "") -> list[ChatMessage]:
    """The chat prompt for one attempt's next action; a ``prefix`` opens the reply (``action_prefix``)."""
    actions = ", ".join(f"'{a}'" for a in obs.admissible)
    text = (
        f"You are an expert agent operating in a household environment. Your task is to: {obs.task}\n\n"
        f"{_skills(obs.skills)}{_history(obs)}"
        f"You are now at step {obs.step + 1} and your current observation is: {obs.observation}\n"
        f"Your admissible actions of the current situation are: [{actions}].\n\n{FORMAT}"
    )
    opened: list[ChatMessage] = [{"role": "assistant", "content": prefix, "continue_final": True}] if prefix else []
    return [{"role": "user", "content": text}, *opened]
