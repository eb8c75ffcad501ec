"""The batched runner: same episodes as one-at-a-time play, one call per policy per tick."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest

from arena.core.types import read_jsonl, write_jsonl
from arena.runner import EpisodeSpec, Runner, SeatMap, generate_texts, play_one_at_a_time
from arena.games.spy import SpyGame
from arena.games.spy.bots import BOTS
from arena.policies.base import Completion, Request, SamplingParams
from arena.policies.human import HumanPolicy
from arena.policies.scripted import ScriptedPolicy, random_bot


class CountingPolicy(ScriptedPolicy):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_sizes: list[int] = []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        self.batch_sizes.append(len(requests))
        return super().generate(requests)


@pytest.mark.parametrize("config", [{}, {"invalid": {"mode": "retry", "retries": 2}}, {"detector": "god", "god_samples": 2}])
@pytest.mark.parametrize("bot", ["default", "random"])
def test_runner_episodes_equal_one_at_a_time(config: dict, bot: str) -> None:
    fn = BOTS.get(bot, random_bot)
    seeds = list(range(7))
    batched = Runner(lambda: SpyGame(**config), {"p": ScriptedPolicy(fn)}, num_envs=3).play(seeds)
    single = [play_one_at_a_time(SpyGame(**config), {"p": ScriptedPolicy(fn)}, s) for s in seeds]
    assert [e.model_dump_json() for e in batched] == [e.model_dump_json() for e in single]


def test_one_generate_call_per_policy_per_tick() -> None:
    policy = CountingPolicy(BOTS["default"])
    Runner(lambda: SpyGame(n_players=5), {"p": policy}, num_envs=4).play(list(range(4)))
    # perform phase of 4 games, then vote phase of 4 games: 2 calls of 20 turns.
    assert policy.batch_sizes == [20, 20]


def test_seat_map_routes_seats_to_policies() -> None:
    bots = CountingPolicy(BOTS["default"])
    fixed = CountingPolicy(BOTS["fixed_vote"], name="fixed")
    runner = Runner(lambda: SpyGame(n_players=3), {"bots": bots, "fixed": fixed},
                    SeatMap({"player_0": "fixed", "*": "bots"}), num_envs=2)
    episodes = runner.play([0, 1])
    assert fixed.batch_sizes == [2, 2] and bots.batch_sizes == [4, 4]
    for ep in episodes:
        assert {t.policy for t in ep.turns_of(seat="player_0")} == {"fixed"}
        assert ep.turns_of(seat="player_0", phase="vote")[0].action == "0"
    with pytest.raises(KeyError, match="no policy for seat"):
        Runner(lambda: SpyGame(), {"p": bots}, SeatMap({"player_*9": "p"}))


def test_episodes_round_trip_through_jsonl(tmp_path: Path) -> None:
    episodes = Runner(lambda: SpyGame(), {"p": ScriptedPolicy(BOTS["default"])}).play([1, 2, 3])
    path = tmp_path / "episodes.jsonl"
    assert write_jsonl(episodes, path) == 3
    assert list(read_jsonl(path)) == episodes
    packed = tmp_path / "episodes.jsonl.gz"  # gzip by name; a second append adds a gzip member
    assert write_jsonl(episodes[:2], packed) == 2 and write_jsonl(episodes[2:], packed) == 1
    assert list(read_jsonl(packed)) == episodes
    assert packed.stat().st_size < path.stat().st_size / 3


def test_a_human_takes_a_seat() -> None:
    typed = io.StringIO("I think about it.\nAnswer: my summary\n.\n\\boxed{N/A}\n.\n")
    screen = io.StringIO()
    human = HumanPolicy(stdin=typed, stdout=screen)
    runner = Runner(lambda: SpyGame(n_players=3), {"me": human, "bots": ScriptedPolicy(BOTS["default"])},
                    SeatMap({"player_1": "me", "*": "bots"}), num_envs=1)
    (ep,) = runner.play([5])
    mine = ep.turns_of(seat="player_1")
    assert [t.action for t in mine] == ["my summary", "N/A"]
    assert "your turn: player_1" in screen.getvalue() and "Answer:" in screen.getvalue()


def test_specs_fix_options_and_seat_each_game_differently() -> None:
    a = CountingPolicy(BOTS["default"], name="a")
    b = CountingPolicy(BOTS["fixed_vote"], name="b")
    runner = Runner(lambda: SpyGame(n_players=3), {"a": a, "b": b}, SeatMap({"*": "a"}), num_envs=3)
    specs = [
        EpisodeSpec(seed=1, options={"spy": 2}),
        EpisodeSpec(seed=1, options={"spy": 0}, seats=SeatMap({"player_1": "b", "*": "a"})),
        EpisodeSpec(seed=1),
    ]
    first, second, plain = runner.play(specs)
    assert first.info["spy"] == "player_2" and second.info["spy"] == "player_0"
    assert first.options == {"spy": 2} and plain.options == {}
    # A fixed spy leaves everything else the seed draws (the source) as it was.
    assert first.info["source_id"] == second.info["source_id"] == plain.info["source_id"]
    assert {t.policy for t in second.turns_of(seat="player_1")} == {"b"}
    assert {t.policy for t in first.turns} == {"a"}
    assert second.turns_of(seat="player_1", phase="vote")[0].action == "0"
    assert set(first.outcome) == {"player_0", "player_1", "player_2"}


def test_sampling_comes_per_policy_and_phase() -> None:
    seen: list[tuple[str, int]] = []

    class Recording(ScriptedPolicy):
        def generate(self, requests: Sequence[Request]) -> list[Completion]:
            seen.extend((r.seat, r.params.max_new_tokens) for r in requests)
            return super().generate(requests)

    table = {"perform": SamplingParams(max_new_tokens=40), "vote": SamplingParams(max_new_tokens=5)}
    runner = Runner(lambda: SpyGame(n_players=3), {"p": Recording(BOTS["default"])},
                    sampling=lambda policy, phase: table[phase], num_envs=1)
    runner.play([0])
    assert [n for _, n in seen] == [40, 40, 40, 5, 5, 5]


def test_generate_texts_is_one_seeded_call_outside_a_game() -> None:
    calls: list[list[tuple[int | None, str, float, int, str]]] = []

    class Echo:
        def generate(self, requests: Sequence[Request]) -> list[Completion]:
            calls.append([(r.seed, r.seat, r.params.temperature, r.params.max_new_tokens, r.messages[-1]["content"])
                          for r in requests])  # fmt: skip
            return [Completion(text=r.messages[-1]["content"].upper()) for r in requests]

    chats = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    texts = generate_texts(Echo(), chats, temperature=0.3, max_new_tokens=7, seed=40, seat="evolve")  # type: ignore[arg-type]
    assert texts == ["A", "B"]
    assert calls == [[(40, "evolve", 0.3, 7, "a"), (41, "evolve", 0.3, 7, "b")]]
