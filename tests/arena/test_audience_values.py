"""Who may see a reply, as the engine records it (``LLMGame.reply_seen_by``), by hand (fast; in ``make mutation``):
a phase's fixed ``audience``, a reply that names its own (``Phase(addressed=True)``), and neither."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.core.game import Phase
from tests.fixtures.direct_messages import FOUR, DirectMessages


class FixedAudience(DirectMessages):
    """The same messages in a phase whose audience is fixed when it opens: ann to bob, bob to ann and cat; cat and
    dan are left out of the mapping (each writes for itself alone)."""

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        return Phase("dm", FOUR, hidden=False, audience={"ann": ["bob"], "bob": ["ann", "cat"]})

    def reply_audience(self, seat: str, action: Any) -> Sequence[str]:
        raise AssertionError("a phase with a fixed audience never asks the reply")


def test_a_reply_that_names_its_reader() -> None:
    env = DirectMessages()
    env.reset(seed=0)
    assert env.reply_seen_by("dm", 0, "ann") is None  # nothing written yet
    for text in ("to cat: hello", "nobody named", "to ann: hi", "to bob: see you"):
        env.step(text)
    assert [env.reply_seen_by("dm", 0, s) for s in FOUR] == [("cat",), (), ("ann",), ("bob",)]
    assert env.reply_seen_by("dm", 1, "ann") is None and env.reply_seen_by("read", 0, "ann") is None
    env.step("anything")
    assert env.reply_seen_by("read", 0, "ann") is None  # a phase that declares no audience records none


def test_a_fixed_audience_is_recorded_per_writer() -> None:
    env = FixedAudience()
    env.reset(seed=0)
    for text in ("to cat: a", "to dan: b", "to ann: c", "to bob: d"):
        env.step(text)
    assert [env.reply_seen_by("dm", 0, s) for s in FOUR] == [("bob",), ("ann", "cat"), (), ()]


class ToTheNextSeat(DirectMessages):
    """Each reply reaches the next seat round the table, whatever it says: the audience comes from the writer."""

    def reply_audience(self, seat: str, action: Any) -> Sequence[str]:
        return [FOUR[(FOUR.index(seat) + 1) % len(FOUR)]]


def test_the_audience_hook_is_asked_with_the_writer() -> None:
    env = ToTheNextSeat()
    env.reset(seed=0)
    for text in ("to cat: a", "", "to ann: c", "to bob: d"):
        env.step(text)
    assert [env.reply_seen_by("dm", 0, s) for s in FOUR] == [("bob",), ("cat",), ("dan",), ("ann",)]
