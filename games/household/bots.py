"""Scripted household players for tests, demos and baselines.

* ``random_admissible`` (``default``): a uniformly random admissible action.
* ``explorer``: goes to each receptacle in turn, opening closed ones; takes
  nothing, so it never solves a task; a baseline of valid but aimless play.
"""

from __future__ import annotations

import numpy as np

from games.household.actions import format_action
from games.household.types import HouseholdObservation


def random_admissible(obs: HouseholdObservation, rng: np.random.Generator) -> str:
    moves = obs.admissible or ("look",)
    return format_action(moves[int(rng.integers(len(moves)))], "I pick an admissible action.")


def explorer(obs: HouseholdObservation, rng: np.random.Generator) -> str:
    opens = [m for m in obs.admissible if m.startswith("open ")]
    goes = [m for m in obs.admissible if m.startswith("go to ")]
    move = opens[0] if opens else goes[obs.step % len(goes)] if goes else "look"
    return format_action(move, "I search the room.")


BOTS = {"random_admissible": random_admissible, "explorer": explorer, "default": random_admissible}
