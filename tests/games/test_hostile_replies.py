"""Hostile replies (issue 39): every parse under 1 s up to 1 MB (more for the 1.7 MB reply), TextArena's
verdicts unchanged on ordinary replies, and every episode writable, in every game family.

The time bounds are generous: the fixed parsers take ~0.05 s on these replies on a loaded two-core machine,
the old ones 4 s (OpenSpiel, 1.7 MB), 15-28 s (TextArena, 1,607 characters) or hours (1 MB of dots).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.core.registry import game_class
from arena.core.types import Episode, read_jsonl, write_jsonl

_MB = 1_000_000
_LIMIT_S = 5.0  # a stall bound, not a timing: these parse in 0.01-0.2 s on a quiet host; seen at 1.x s on a loaded one
_LONE = re.compile("[\ud800-\udfff]")

# ---------------------------------------------------------------- the worst replies of the issue
_NESTED = '{"bid": [' * 20_000 + '"1-1", "Liar", "Bet", "x(0,0)", "[Accept]"' + "]}" * 20_000
_SURROGATE_PROPOSAL = ('{"task": "What is 6 * 7?\\ud800", "contract": {"answer": "\\udfff", '
                       '"\\ud800": ["\\udc00", {"\\udbff": "\\ud800"}]}}')
WORST = {
    "offer_spaces": "[Offer:" + " " * 1600,  # 1,607 characters: 27.9 s a negotiation step before
    "offer_newlines": "[Offer:" + " \n" * 500,  # 1,007 characters: 6.4-8.9 s
    "offer_spaces_1mb": "[Offer:" + " " * _MB,
    "offer_dots_1mb": "[Offer: 3 Wood -> 2 Ore" + "." * _MB,
    "nested_1_7mb": (_NESTED * (1_700_000 // len(_NESTED) + 1))[:1_700_000],
    "no_name_1_7mb": "x " * 850_000,
    "surrogate_json": _SURROGATE_PROPOSAL,
    "surrogate_answer": '{"answer": "\\ud800", "\\udfff": ["\\udc00"]}',
    "raw_surrogates": "\ud800 [Offer: 1 Wood -> 1 Ore] [Accept] \udfff 1-1 Bet",
}

# ---------------------------------------------------------------- game families and their variants
FAMILIES: dict[str, list[dict[str, Any]]] = {
    "textarena": [{"env_id": i} for i in ("SimpleNegotiation-v0", "TicTacToe-v0", "KuhnPoker-v0")],
    "openspiel": [{"game": "kuhn_poker"}, {"game": "leduc_poker"}, {"game": "tic_tac_toe"},
                  {"game": "liars_dice", "params": {"numdice": 5}}],
    "skill_sp": [{"probes": 1, "solvers": 1}],
    "spy": [{}],
    "lsp": [{}],
    "household": [{}],
}


def _lone_surrogates(value: Any) -> list[str]:
    """Every string inside ``value`` (keys included) holding a lone surrogate."""
    found, todo = [], [value]
    while todo:
        x = todo.pop()
        if isinstance(x, str):
            found += [x] if _LONE.search(x) else []
        elif isinstance(x, dict):
            todo += [*x.keys(), *x.values()]
        elif isinstance(x, (list, tuple)):
            todo += list(x)
    return found


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def play_hostile(env: Any, seed: int, replies: list[str]) -> Iterator[tuple[str, str, float, float]]:
    """Play one episode with ``replies`` cycled as every completion; yield (phase, reply name, parse s, step s)."""
    names = list(replies)
    env.reset(seed=seed)
    k = 0
    for agent in env.agent_iter(max_iter=500):
        _, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
            continue
        name = names[k % len(names)]
        phase = env.phase.name
        _, parse_s = _timed(env.parse, agent, WORST[name])  # what step does first (on the cleaned text)
        _, step_s = _timed(env.step, WORST[name])
        k += 1
        yield phase, name, parse_s, step_s
    assert not env.agents, "the episode did not end"


def _writes_and_reads_back(ep: Episode, tmp_path: Any) -> None:
    path = tmp_path / f"{ep.episode_id}.jsonl"
    path.unlink(missing_ok=True)
    assert write_jsonl([ep], path) == 1
    (back,) = list(read_jsonl(path))
    assert back == Episode.model_validate_json(ep.model_dump_json())
    assert not _lone_surrogates(back.model_dump())


@pytest.mark.parametrize(("family", "config"), [(f, c) for f, configs in sorted(FAMILIES.items()) for c in configs],
                         ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x.values())))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(replies=st.permutations(sorted(WORST)), seed=st.integers(0, 3))
def test_worst_replies_parse_in_time_and_every_episode_writes(family: str, config: dict[str, Any], replies: list[str],
                                                               seed: int, tmp_path: Any) -> None:
    """Every worst reply, in a drawn order, as every completion of one episode of each family's variants."""
    env = game_class(family)(**config, max_turns=len(WORST) + 3)
    for phase, name, parse_s, step_s in play_hostile(env, seed, replies):
        assert parse_s < _LIMIT_S, f"{family} {config} {phase}: parsing {name} took {parse_s:.2f}s"
        if family == "textarena":  # the adapter's step is TextArena's step (a dry run, then the real one)
            assert step_s < 2 * _LIMIT_S, f"{config} {phase}: a step on {name} took {step_s:.2f}s"
    _writes_and_reads_back(env.episode(), tmp_path)


# ---------------------------------------------------------------- TextArena: SimpleNegotiation
def _negotiation() -> Any:
    env = game_class("textarena")(env_id="SimpleNegotiation-v0")
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("name", ["offer_spaces", "offer_newlines", "offer_spaces_1mb", "offer_dots_1mb"])
def test_negotiation_steps_on_backtracking_offers_without_a_stall(name: str) -> None:
    env = _negotiation()
    for _ in range(2):  # one reply with no offer before it, one with an offer (the first) on the table
        parsed, parse_s = _timed(env.parse, env.agent_selection, WORST[name])
        _, step_s = _timed(env.step, WORST[name])
        assert parse_s < _LIMIT_S and step_s < _LIMIT_S, f"{name}: parse {parse_s:.2f}s, step {step_s:.2f}s"
        assert parsed == WORST[name]  # TextArena takes it: there is no complete offer in it, only talk
        env.step("[Offer: 1 Wheat -> 1 Wood]")


def test_the_linear_offer_search_is_textarenas_pattern() -> None:
    from textarena.envs.SimpleNegotiation.env import SimpleNegotiationEnv

    from arena.games.textarena.bridge import NEGOTIATION_OFFER, LinearOfferPattern, make_env, PrivateRandom

    stock = SimpleNegotiationEnv().offer_pattern
    assert (stock.pattern, stock.flags) == (NEGOTIATION_OFFER, LinearOfferPattern.flags)
    env = make_env("SimpleNegotiation-v0", 2, 0, PrivateRandom(0))
    core = env
    while "env" in vars(core):
        core = core.env
    assert isinstance(core.offer_pattern, LinearOfferPattern)


_OFFER_PIECES = st.sampled_from([
    "[Offer", "[offer", "[OFFER:", ":", " ", "  ", "\n", "\t", "\u00a0", "\u2003", ".", "...", "]", "[", "I", "i",
    "give", "offer", " I give ", "I offer  ", "3 Wood", "2 ore", "->", " -> ", ",", "x", "[Accept]", "\u0130", "K",
])


@settings(max_examples=3000, deadline=None)
@given(pieces=st.lists(_OFFER_PIECES, max_size=14))
def test_the_linear_offer_search_finds_the_same_match(pieces: list[str]) -> None:
    from arena.games.textarena.bridge import NEGOTIATION_OFFER, LinearOfferPattern

    text = "".join(pieces)
    want = re.compile(NEGOTIATION_OFFER, LinearOfferPattern.flags).search(text)
    got = LinearOfferPattern().search(text)
    assert (want is None) == (got is None), text
    if want is not None and got is not None:
        assert (got.span(), got.group(0), got.group(1)) == (want.span(), want.group(0), want.group(1)), text


# TextArena's own examples (its prompt and its parser's cases), and ordinary talk around them.
_ORDINARY = [
    "[Offer: 3 Sheep, 2 Ore -> 5 Brick, 2 Sheep]", "[Accept]", "[Deny]", "Let us trade. [Offer: 1 Wheat -> 1 Wood]",
    "[Offer: I give 2 Wheat -> 1 Ore.]", "[offer: I offer 1 Wood, 1 Sheep -> 2 Brick ...]", "[Offer: 2 Woods -> 1 Sheeps]",
    "[Offer:\n  5 Wheat,\n 1 Ore\n -> 3 Brick  .  ]", "[Offer: 100 Ore -> 1 Wheat]", "[Offer: 1 Gold -> 1 Wheat]",
    "[Offer: 1 Wheat]", "[Offer: -> ]", "[Offer:]", "[Offer: ]", "I accept your offer. [Accept]", "no thanks",
    "[Accept] [Offer: 1 Brick -> 2 Wood]", "", "[Offer: 0 Wheat -> 1 Wood]", "[Offer: 1 Wheat -> 1 Wood] [Offer: 2 Ore -> 1 Sheep]",
]


def _reasons_of(env: Any, text: str, rand: Any) -> tuple[list[str], bool]:
    from arena.games.textarena.bridge import step_recording

    with rand.active():
        return step_recording(env, text)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_negotiation_verdicts_replay_identically_against_ta_make(seed: int) -> None:
    """The same replies on TextArena's own ``ta.make(id)`` and on arena's: same verdicts, state and views."""
    import textarena as ta

    from arena.games.textarena.bridge import PrivateRandom, make_env, peek_observation

    ours_rand, stock_rand = PrivateRandom(seed), PrivateRandom(seed)
    ours = make_env("SimpleNegotiation-v0", 2, seed, ours_rand)
    with stock_rand.active():
        stock = ta.make("SimpleNegotiation-v0")
        stock.reset(num_players=2, seed=seed)
    for k in range(60):
        if stock.state.done:
            assert ours.state.done
            break
        text = _ORDINARY[(k * (seed + 3)) % len(_ORDINARY)]
        assert _reasons_of(ours, text, ours_rand) == _reasons_of(stock, text, stock_rand), text
        assert ours.state.game_state == stock.state.game_state
        for pid in (0, 1):
            assert peek_observation(ours, pid) == peek_observation(stock, pid)
    assert ours.state.rewards == stock.state.rewards


# ---------------------------------------------------------------- OpenSpiel: one linear pass
def _liars_dice() -> Any:
    env = game_class("openspiel")(game="liars_dice", params={"numdice": 5})
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("name", ["nested_1_7mb", "no_name_1_7mb"])
def test_liars_dice_parses_a_1_7_mb_reply_without_a_stall(name: str) -> None:
    env = _liars_dice()
    assert len(env.observe(env.agent_selection).legal) == 60
    parsed, took = _timed(env.parse, env.agent_selection, WORST[name])
    assert took < _LIMIT_S, f"{name}: {took:.2f}s"
    assert (parsed == 0) if name == "nested_1_7mb" else not isinstance(parsed, int)  # 1-1 is the last bid named


def _reference_parse(text: str, legal: list[str]) -> int | None:
    """The slow definition: every position, every name; the last start, then the longest, then the first."""
    best = None
    for index, name in enumerate(legal):
        pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.IGNORECASE)
        for start in range(len(text)):
            if pattern.match(text, start):
                key = (start, len(name), -index)
                best = key if best is None or key > best else best
    return None if best is None else -best[2]


_LEGAL_SETS = [["1-1", "1-2", "2-1", "10-1", "Liar"], ["Pass", "Bet"], ["Fold", "Call", "Raise"],
               ["x(0,0)", "x(0,1)", "o(1,1)"], ["a", "a b", "b", "b c", "A B C"]]


@settings(max_examples=400, deadline=None)
@given(legal=st.sampled_from(_LEGAL_SETS), data=st.data())
def test_openspiel_parse_is_the_reference_definition(legal: list[str], data: Any) -> None:
    from arena.core.game_types import Invalid
    from arena.games.openspiel.rules import parse_action

    pieces = st.sampled_from([*legal, *(n.upper() for n in legal), " ", "-", "x", "1", ",", "\n", "é", "_"])
    text = "".join(data.draw(st.lists(pieces, max_size=10), label="pieces"))
    got = parse_action(text, legal)
    want = _reference_parse(text, legal)
    assert (None if isinstance(got, Invalid) else got) == want, text


def test_openspiel_mentions_may_overlap() -> None:
    from arena.games.openspiel.rules import parse_action

    assert parse_action("1-1-2", ["1-1", "1-2"]) == 1
    assert parse_action("I bet, no: PASS", ["Pass", "Bet"]) == 0


# ---------------------------------------------------------------- Skill-SP: JSON-escaped lone surrogates
def test_every_decoded_json_value_is_cleaned() -> None:
    from arena.games.skill_sp.rules import Proposal, json_values, parse_answer, parse_proposal

    proposal = parse_proposal(_SURROGATE_PROPOSAL)
    assert isinstance(proposal, Proposal)
    assert proposal.prompt == "What is 6 * 7?\ufffd" and proposal.contract["answer"] == "\ufffd"
    assert not _lone_surrogates([proposal.prompt, proposal.contract])
    for text in (WORST["surrogate_answer"], "xx " + WORST["surrogate_answer"] + " yy", '"\\ud800"'):
        assert not _lone_surrogates(parse_answer(text)), text
    assert not _lone_surrogates(json_values(f"a {_SURROGATE_PROPOSAL} b [\"\\udfff\"]"))
    assert parse_answer('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}  # an escaped pair is one character


def test_a_skill_sp_reply_with_a_lone_surrogate_in_every_field_gives_a_writable_episode(tmp_path: Any) -> None:
    """Exploration: the task (with its U+FFFD) reaches the probes and the solvers, whose answer "\\udfff" is
    the contract's once both are cleaned; skill stream: the skill's validators reject the contract."""
    env = game_class("skill_sp")(probes=1, solvers=1)
    for stream in ("exploration", "skill"):
        env.reset(seed=0, options={"stream": stream})
        for agent in env.agent_iter(max_iter=50):
            _, _, term, trunc, _ = env.last()
            reply = _SURROGATE_PROPOSAL if agent == "proposer" else '"\\udfff"'
            env.step(None if term or trunc else reply)
        ep = env.episode()
        assert ep.info["parsed"]
        if stream == "exploration":
            assert [t.phase for t in ep.turns] == ["propose", "probe", "solve"], ep.info["reason"]
            assert "What is 6 * 7?\ufffd" in ep.turns[-1].messages[-1]["content"]
        _writes_and_reads_back(ep, tmp_path)


def test_a_skill_sp_observation_holds_no_lone_surrogate() -> None:
    """A skill the evolving model wrote decodes YAML and JSON escapes: its text is cleaned on the way into a prompt."""
    from arena.games.skill_sp.types import SkillSpObservation

    obs = SkillSpObservation(role="proposer", description="a\ud800", rules="\udfff", hints="h", example_task="t\udc00",
                             tools=("x\ud800",), task="q\udbff")
    assert not _lone_surrogates(obs.model_dump())
    assert obs.description == "a\ufffd" and obs.tools == ("x\ufffd",)
