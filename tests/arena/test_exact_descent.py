"""Exploitability descent, full width (arena/games/openspiel/descent.py): the advantages by hand, as the
gradient of each player's value against a held best response (finite differences through OpenSpiel's own
expected-value code), and a tabular descent with them that converges on Kuhn poker, as Lockhart et al.
report; the run's one-line refusals."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.games.openspiel.descent import action_advantages, bounded, check_game, descent_targets, natural_advantages
from arena.games.openspiel.exact import best_response_table, expected_returns, exploitability_of, own_reach, tabular_policy
from arena.games.openspiel.types import OpenSpielConfig
from tolerance import approx32, approx64, within

KUHN = OpenSpielConfig(game="kuhn_poker")


def test_action_advantages_by_hand() -> None:
    # pi = (0.25, 0.75), q = (1, -1): v = -0.5; A = 0.5 * (0.25 * 1.5, 0.75 * -0.5)
    assert action_advantages([0.25, 0.75], [1.0, -1.0], 0.5) == pytest.approx([0.1875, -0.1875])
    assert action_advantages([0.2, 0.3, 0.5], [3.0, 0.0, -1.0], 2.0) == pytest.approx([1.16, -0.06, -1.1])  # v = 0.1
    assert action_advantages([1.0, 0.0], [1.0, 5.0], 1.0) == pytest.approx([0.0, 0.0])  # a pure policy: no direction
    # natural: c (q - v), no pi factor; at a pure policy it still points to the better action
    assert natural_advantages([0.25, 0.75], [1.0, -1.0], 0.5) == pytest.approx([0.75, -0.25])
    assert natural_advantages([1.0, 0.0], [1.0, 5.0], 1.0) == pytest.approx([0.0, 4.0])


class Logits:
    """A tabular softmax policy over Kuhn's information states, as ``ActionProbs``."""

    def __init__(self, seed: int = 0, scale: float = 1.0):
        self.rng, self.scale, self.theta = np.random.default_rng(seed), scale, {}

    def row(self, q) -> np.ndarray:
        key = (q.seat, q.observation.info_state)
        if key not in self.theta:
            self.theta[key] = self.scale * self.rng.standard_normal(len(q.actions))
        return self.theta[key]

    def __call__(self, queries) -> list[list[float]]:
        out = []
        for q in queries:
            e = np.exp(self.row(q) - self.row(q).max())
            out.append(list(e / e.sum()))
        return out


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_exploitability_is_openspiels_and_advantages_sum_to_zero(seed: int) -> None:
    probs = Logits(seed)
    queries, advantages, metrics = descent_targets(KUHN, probs)
    assert len(queries) == 12 and all(len(a) == 2 for a in advantages)
    want = exploitability_of(KUHN.load(), tabular_policy(KUHN, probs))["exploitability"]
    assert metrics["exploitability"] == approx64(want)
    assert all(abs(sum(a)) < 1e-12 for a in advantages)


def test_advantages_are_the_value_gradient_against_a_held_best_response() -> None:
    """By Danskin's theorem: for player p, d u_p(pi_p, b) / d theta(I, a) = x_p(I) * A(I, a) at every state I
    of p, where b is the other player's best response to pi (held fixed), theta the softmax logits and
    x_p(I) p's own reach (ED leaves it out). Checked by central differences of OpenSpiel's policy value."""
    game = KUHN.load()
    probs = Logits(3)
    queries, advantages, _ = descent_targets(KUHN, probs)
    table = tabular_policy(KUHN, probs)
    held = best_response_table(game, table)
    reach = own_reach(game, table)
    key_of = {(q.seat, q.observation.info_state): r for r, q in enumerate(queries)}
    eps, checked = 1e-6, 0
    for (seat, _), r in key_of.items():
        player = int(seat.removeprefix("player_"))
        for a in range(2):
            values = []
            for sign in (1, -1):
                probs.theta[(seat, queries[r].observation.info_state)][a] += sign * eps
                profile = [held, held]
                profile[player] = tabular_policy(KUHN, probs)
                values.append(expected_returns(game, profile)[player])
                probs.theta[(seat, queries[r].observation.info_state)][a] -= sign * eps
            grad = (values[0] - values[1]) / (2 * eps)
            assert grad == approx32(reach[r] * advantages[r][a]), (seat, queries[r].observation.info_state, a)
            checked += abs(grad) > 1e-4
    assert checked >= 12  # most states have a non-zero gradient: the check is not vacuous


def test_tabular_descent_with_these_advantages_converges_on_kuhn() -> None:
    """theta(I, .) += lr * A(I, .) is gradient ascent of ED's objective for a tabular softmax (its gradient in
    the logits is A itself, since sum_a A(I, a) = 0): from uniform play (0.458) it is below 0.05 within 50
    steps (Lockhart et al., 2019, figure 2: ED converges in the last iterate on Kuhn)."""
    probs = Logits(0, scale=0.0)
    trace = []
    for _ in range(50):
        queries, advantages, metrics = descent_targets(KUHN, probs)
        trace.append(metrics["exploitability"])
        for q, a in zip(queries, advantages, strict=True):
            probs.row(q)[:] += 2.0 * np.asarray(a)
    assert trace[0] == approx64(11 / 24)
    assert descent_targets(KUHN, probs)[2]["exploitability"] < 0.05, trace[-5:]


def test_bounded_stops_pushing_a_probability_past_the_bound() -> None:
    assert bounded([0.995, 0.005], [0.3, -0.3], 0.01) == [0.0, 0.0]  # already past: no further
    assert bounded([0.995, 0.005], [-0.3, 0.3], 0.01) == [-0.3, 0.3]  # back towards the middle: kept
    assert bounded([0.5, 0.5], [0.3, -0.3], 0.01) == [0.3, -0.3]
    assert bounded([0.99, 0.01], [0.3, -0.3], 0.01) == [0.0, 0.0]  # the bound itself counts as reached
    assert bounded([0.2, 0.3, 0.5], [0.1, -0.2, 0.1], 0.3) == [0.1, 0.0, 0.1]


def test_bounded_descent_converges_and_never_saturates() -> None:
    """The natural weighting with a bound of 0.01 still converges on Kuhn (within 0.05 in 100 steps), and
    no probability ends beyond [0.01 - step, 0.99 + step]; the same descent without the bound saturates."""
    free, held = Logits(0, scale=0.0), Logits(0, scale=0.0)
    descend(free, "natural", 2.0, 100)
    trace = descend(held, "natural", 2.0, 100, bound=0.01)
    assert trace[-1] < 0.05, trace[-5:]
    queries = descent_targets(KUHN, held)[0]
    assert min(min(p) for p in held(queries)) > 1e-3
    assert min(min(p) for p in free(queries)) < 1e-4


def descend(probs: Logits, weighting: str, lr: float, steps: int, bound: float = 0.0) -> list[float]:
    """Tabular descent: the logits move by the gradient of sum_a W(a) log pi(a), W the weighting's advantages."""
    trace = []
    for _ in range(steps):
        queries, advantages, metrics = descent_targets(KUHN, probs, weighting, bound)
        trace.append(metrics["exploitability"])
        for q, a, p in zip(queries, advantages, probs(queries), strict=True):
            a, p = np.asarray(a), np.asarray(p)
            probs.row(q)[:] += lr * (a - p * a.sum())
    return trace


def test_natural_weighting_leaves_a_saturated_start_where_eds_gradient_vanishes() -> None:
    """From a near-pure policy (always pass: logits 6 and 0), ED's pi-weighted advantages barely move in 100
    steps; the natural weighting c (q - v) is at 0.262 after 10, below 0.1 from step 17 and at 0.002 after 300
    (arena/exact/descent.py's numbers)."""
    def saturated() -> Logits:
        probs = Logits(0, scale=0.0)
        for q in descent_targets(KUHN, probs)[0]:
            probs.row(q)[:] = [6.0, 0.0]
        return probs

    policy = descend(saturated(), "policy", 2.0, 101)
    natural = descend(saturated(), "natural", 0.5, 301)
    assert policy[0] == pytest.approx(natural[0]) and policy[0] > 0.99
    assert policy[100] == within(0.9372, 1e-4, "the docstring's figure, to 4 decimals")
    assert natural[10] == within(0.2623, 1e-4, "the docstring's figure, to 4 decimals")
    assert next(i for i, v in enumerate(natural) if v < 0.1) == 17
    assert natural[300] == within(0.0018, 1e-4, "the docstring's figure, to 4 decimals")


@pytest.mark.parametrize("config, words", [
    (OpenSpielConfig(game="kuhn_poker", params={"players": 3}),
     r"^exploitability descent needs a two-player zero-sum game; kuhn_poker\(players=3\) has 3 players$"),
    (OpenSpielConfig(game="sheriff"),
     r"^exploitability descent needs a two-player zero-sum game; sheriff\(\) has 2 players and is not zero-sum$"),
    (OpenSpielConfig(game="leduc_poker", exploitability_max_states=10), "more than 10 information states"),
])
def test_games_descent_cannot_walk_are_refused(config: OpenSpielConfig, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_game(config)


def test_no_bound_keeps_the_advantages_of_a_pure_policy() -> None:
    """bound 0 is off: at a pure policy (always pass) the natural advantage of the never-played Bet is kept
    where it is negative and where it is positive (a bound of 0 would otherwise zero the negative ones)."""
    probs = Logits(0, scale=0.0)
    queries = descent_targets(KUHN, probs)[0]
    for q in queries:
        probs.row(q)[:] = [0.0, -800.0]  # exp underflows: Bet has probability exactly 0
    _, plain, _ = descent_targets(KUHN, probs, "natural")
    _, off, _ = descent_targets(KUHN, probs, "natural", 0.0)
    assert off == plain
    assert any(a[1] < 0 for a in plain) and any(a[1] > 0 for a in plain)


@pytest.mark.parametrize("sets, words", [
    (["game.action_mode=generate"], "needs game.action_mode: score"),
    (["learner.beta=0.1"], "learner.beta 0"),
    (["learner.aggregation=sequence"], "aggregation token or constant"),
    (["train.league.enabled=true"], "plays no games"),
    (["game.params.players=3"], "two-player zero-sum"),
])
def test_a_run_descent_cannot_drive_is_one_line_at_start_up(sets: list[str], words: str) -> None:
    args = [a for s in sets for a in ("--set", s)]
    out = subprocess.run([sys.executable, "-m", "arena.train", "games/openspiel/kuhn.ed.yaml", *args,
                          "--set", "train.run_dir=/nonexistent/never"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "train.descent" in lines[0] and words in lines[0], out.stderr


def test_leduc_ed_yaml_is_kuhn_ed_yaml_on_leduc() -> None:
    """leduc.ed.yaml: kuhn.ed.yaml's method (natural weighting, bound 0.05, one update a step) on Leduc, whose 936
    states the descent can walk; only the game, the learning rate and the length differ (bench/RESULTS.md)."""
    from pathlib import Path

    from arena.loop.config import load_config

    here = Path(__file__).resolve().parents[2] / "arena/games/openspiel"
    leduc, kuhn = (load_config(here / f"{n}.yaml") for n in ("leduc.ed", "kuhn.ed"))
    assert leduc.game.settings.game == "leduc_poker" and leduc.game.settings.action_mode == "score"
    assert leduc.learner.model_copy(update={"lr": kuhn.learner.lr}) == kuhn.learner and leduc.learner.lr == 1e-5
    assert leduc.policies == kuhn.policies
    assert (leduc.train.descent.weighting, leduc.train.descent.bound) == ("natural", 0.05)
    assert check_game(leduc.game.settings).num_players() == 2  # under exploitability_max_states
