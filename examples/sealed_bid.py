"""A second example game: a sealed-bid auction with an appraiser, one public and two hidden phases.

Seats (fixed roles): ``appraiser_0`` and ``bidder_0``, ``bidder_1``. An item
is worth ``v``, drawn from 10..100; only the appraiser sees it.

1. ``appraise`` (public): the appraiser announces a value; everyone sees it.
2. ``bid`` (hidden): each bidder bids 0..100 in secret; then the bids are shown.
3. ``final`` (hidden): each bidder bids again, knowing the first bids.

The highest final bid wins (a tie: nobody) and pays it. Rewards, in units of
100 and zero-sum: the winner gets ``v - b``; the other bidder and the
appraiser each pay half of it (the appraiser gains when the winner overpays, so
it is tempted to inflate). Grammar: the last whole number in the reply; out of
range or none -> invalid (abstains). The kit checks the zero-sum rule.

    .venv/bin/python examples/sealed_bid.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from arena import (
    ChatMessage, GameConfig, Invalid, LLMGame, Message, Phase,
    Runner, ScriptedPolicy, check_game, format_episode, last_integer,
)

BIDDERS = ("bidder_0", "bidder_1")


class SealedBidConfig(GameConfig):
    max_bid: int = Field(default=100, ge=10, le=10_000, description="Bids and appraisals range over 0..max_bid.")


class SealedBidObservation(Message):
    role: str
    phase: str
    value: int | None = None  # the appraiser's alone
    appraisal: int | None = None
    first_bids: tuple[int | None, ...] = ()
    max_bid: int = 100


def settle(value: int, bids: dict[str, int]) -> dict[str, float]:
    """Zero-sum rewards: the unique highest bid wins ``value - bid``; the others pay half each."""
    if not bids or list(bids.values()).count(max(bids.values())) > 1:
        return {"appraiser_0": 0.0, **{b: 0.0 for b in BIDDERS}}
    winner = max(bids, key=bids.__getitem__)
    gain = (value - bids[winner]) / 100
    return {"appraiser_0": -gain / 2, **{b: (gain if b == winner else -gain / 2) for b in BIDDERS}}


class SealedBidGame(LLMGame[SealedBidObservation, SealedBidConfig]):
    metadata = {"name": "sealed_bid_v0", "render_modes": ["ansi"]}
    config_type = SealedBidConfig
    observation_type = SealedBidObservation
    phases = ("appraise", "bid", "final")
    roles = ("appraiser", "bidder")
    zero_sum = True

    def seat_names(self) -> Sequence[str]:
        return ["appraiser_0", *BIDDERS]

    def setup(self, rng: np.random.Generator, options: Any) -> Phase:
        self.value = int(rng.integers(10, 101)) * self.config.max_bid // 100
        self.appraisal: int | None = None
        self.first_bids: dict[str, int | None] = {}
        self.seat_roles = {s: s.split("_")[0] for s in self.possible_agents}
        return Phase("appraise", ("appraiser_0",), hidden=False)

    def observe_seat(self, seat: str) -> SealedBidObservation:
        return SealedBidObservation(
            role=self.role(seat), phase=self.phase.name if not self.done else "done",
            value=self.value if seat == "appraiser_0" else None, appraisal=self.appraisal,
            first_bids=tuple(self.first_bids.get(b) for b in BIDDERS) if self.first_bids else (),
            max_bid=self.config.max_bid,
        )

    def render_messages(self, obs: SealedBidObservation) -> list[ChatMessage]:
        rules = (f"A sealed-bid auction for one item. Bids range 0..{obs.max_bid}; the highest final bid wins and "
                 "pays its bid. The appraiser gains when the winner overpays.")
        if obs.role == "appraiser":
            ask = f"You are the appraiser. The item is worth {obs.value}. Announce an appraisal as one number."
        else:
            seen = f" First-round bids: {list(obs.first_bids)}." if obs.first_bids else ""
            ask = f"You are a bidder. The appraiser says the item is worth {obs.appraisal}.{seen} Reply with your bid."
        return [{"role": "system", "content": rules}, {"role": "user", "content": ask}]

    def parse(self, seat: str, text: str) -> Any:
        return last_integer(text, 0, self.config.max_bid)

    def close_phase(self, phase: Phase, actions: dict[str, Any]) -> Phase | None:
        valid = {s: a for s, a in actions.items() if not isinstance(a, Invalid)}
        if phase.name == "appraise":
            self.appraisal = valid.get("appraiser_0")
            return Phase("bid", BIDDERS)
        if phase.name == "bid":
            self.first_bids = {b: valid.get(b) for b in BIDDERS}
            return Phase("final", BIDDERS)
        for seat, reward in settle(self.value, valid).items():
            self.credit(seat, "appraise" if seat == "appraiser_0" else "final", reward)
        return None

    def action_examples(self, seat: str) -> Sequence[str]:
        return ["I bid 40", "55", "My appraisal: 90", "0"]


def shrewd_bot(obs: SealedBidObservation, rng: np.random.Generator) -> str:
    """Appraisers inflate by a quarter; bidders bid a little under the appraisal, more in the final round."""
    if obs.role == "appraiser":
        return f"Appraisal: {min(obs.max_bid, (obs.value or 0) * 5 // 4)}"
    base = (obs.appraisal or obs.max_bid // 2) * (0.7 if not obs.first_bids else 0.8)
    return f"I bid {int(base) + int(rng.integers(0, 5))}"


SealedBidGame.scripted_bots = {"shrewd": shrewd_bot}  # bots live on the class


def main(episodes: int = 3) -> None:
    check_game(lambda: SealedBidGame(), bot=shrewd_bot)
    print("conformance kit: passed (zero-sum checked)")
    runner = Runner(lambda: SealedBidGame(), {"bots": ScriptedPolicy(shrewd_bot)}, num_envs=episodes)
    for ep in runner.play(list(range(episodes))):
        print(format_episode(ep, max_chars=200))


if __name__ == "__main__":
    main()
