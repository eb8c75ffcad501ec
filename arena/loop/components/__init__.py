"""The training features, one module each, and their order (arena/loop/component.py says what a
component is). The kernel calls each hook over this list in order, so the order is part of the loop:

* ``warm_start`` before ``evals`` (the step-0 evaluation sees the warm-started model), both before
  ``async_`` (the rollout thread starts on those weights) and ``progress`` (its bar opens last);
* ``game_state`` before ``evals`` (evaluations see the state the step left);
* ``average`` before ``evals`` (it adds its policy to the table the evaluations play, at build time);
* ``loggers`` before ``canary`` (the trackers have the row whose gap stops the run);
* ``memory`` after every component whose ``before_update`` may still use a generator (it releases the engine
  there, until the weight sync).

A new feature is one module here with its class added to :data:`COMPONENTS`; its section appears
under ``train.<name>`` in every config (arena/loop/config.py mounts them).
"""

from __future__ import annotations

from arena.loop.component import Component
from arena.loop.components.average import AveragePolicy
from arena.loop.components.canary import SyncCanary
from arena.loop.components.descent import Descent
from arena.loop.components.episodes import Episodes
from arena.loop.components.evals import TrainEvals
from arena.loop.components.game_state import GameStateUpdate
from arena.loop.components.league import League
from arena.loop.components.loggers import Loggers
from arena.loop.components.memory import ReleaseMemory
from arena.loop.components.progress import ProgressBar
from arena.loop.components.respond import Responders
from arena.loop.components.rollouts import AsyncRollouts
from arena.loop.components.stop import StopWhen
from arena.loop.components.warm_start import WarmStart

COMPONENTS: tuple[type[Component], ...] = (
    WarmStart, AveragePolicy, GameStateUpdate, TrainEvals, Responders, League, Descent, AsyncRollouts, Episodes, Loggers, SyncCanary,
    StopWhen, ReleaseMemory, ProgressBar,
)
