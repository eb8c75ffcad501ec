"""SpyRL prompt rendering: a pure function from an observation to chat messages.

Wording follows the paper's description of the prompts: the game is explained
("who is the odd one out"), the spy is told it is the spy, the quality rubric is
given, and the model is asked to think and then write a line beginning
``Answer:`` (performing) or a ``\\boxed{k}`` / ``\\boxed{N/A}`` vote (detection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arena.core.types import ChatMessage

if TYPE_CHECKING:
    from arena.games.spy.types import SpyObservation

TASK_NAMES = {"summary": "source text", "story": "story premise", "math": "math problem"}


def task_instruction(obs: SpyObservation) -> str:
    """The task every player performs, with its quality rubric."""
    if obs.task == "summary":
        limit = f" of at most {obs.max_words} words" if obs.max_words else ""
        return (
            f"Task: summarise the source text in one paragraph{limit}. A good summary is faithful, "
            "covers the main points and specific details, and adds nothing that is not in the source."
        )
    if obs.task == "story":
        if obs.min_words and obs.max_words:
            length = f" of {obs.min_words}-{obs.max_words} words"
        elif obs.max_words:
            length = f" of at most {obs.max_words} words"
        else:
            length = ""
        return (
            f"Task: write a story{length} based on the premise. A good story uses every element of "
            "the premise (characters, place, complication), is coherent and has an ending."
        )
    return (
        "Task: solve the math problem. Write ONE sentence of the form 'condition + result' that "
        "states the key step of the solution, and give the final answer in \\boxed{}."
    )


#: What the rules say the spy's copy lacks, per ``mask``.
HIDDEN = {"span": "has one contiguous part hidden with '{mask}' characters",
          "fact": "has one fact (a number or a name) replaced by '{mask}' wherever it appears"}


def _game_rules(obs: SpyObservation) -> str:
    mask = obs.mask_token
    return (
        f"You are playing 'who is the odd one out' with {obs.n_players} players, numbered 0 to "
        f"{obs.n_players - 1}. Every player received the same {TASK_NAMES[obs.task]}, except one "
        f"player, the spy, whose copy {HIDDEN[obs.mask].format(mask=mask)}. "
        "All players do the same task without seeing each other's work. Then everyone reads all "
        "outputs and votes for the player they believe is the spy. A spy who is voted out is "
        "punished; a civilian whose output looks like the spy's also loses."
    )


def _identity(obs: SpyObservation) -> str:
    if obs.role == "detector":
        return "You are the judge: you see the complete source and every player's output."
    who = f"You are player {obs.seat_index}. "
    if obs.role == "spy":
        return who + "You are the spy: part of your copy is hidden. Do the task as well as you can so that nobody notices."
    return who + "You are not the spy: your copy is complete."


def render(obs: SpyObservation) -> list[ChatMessage]:
    """Chat messages for ``obs`` (performing or detection phase)."""
    label = TASK_NAMES[obs.task].capitalize()
    system = f"{_game_rules(obs)}\n{_identity(obs)}"
    if obs.phase != "vote":
        user = (
            f"{label}:\n{obs.view}\n\n{task_instruction(obs)}\n\n"
            "Think first, then write a final line that begins with 'Answer:' followed by your output."
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    shown = "\n\n".join(f"Player {k}: {text}" for k, text in zip(obs.output_players, obs.outputs, strict=True))
    user = (
        f"{label} as you received it:\n{obs.view}\n\nThe players' outputs:\n\n{shown}\n\n"
        "Which player is the spy? Think briefly, then give your vote as \\boxed{k} with the "
        "player's number k, or \\boxed{N/A} if you cannot tell."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
