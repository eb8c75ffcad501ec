"""LSP's written reply prefixes (``challenger_prefix``, ``judge_prefix``: the CPU config's deviations) and
the core hook they use, an open final assistant message (``continue_final``), rendered by
``arena.policies.base.chat_prompt_ids`` and continued by the hf backend. Fast: scripted texts, the built-in
model's tokenizer only, and a tiny random Llama."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from arena.loop.config import load_config
from arena.testing import check_any_text_is_legal, check_game, completions, play_texts
from arena.games.lsp import LspGame
from arena.games.lsp.bots import default_bot
from arena.policies.base import Request, SamplingParams, chat_prompt_ids
from tolerance import LOGITS, approx32

CPU = {"task_reward": "verifier", "query_format": "lenient", "n_solvers": 2,
       "challenger_prefix": "[Start Generation]\nWhat is", "judge_prefix": "<Score>"}


def test_conformance_kit_with_prefixes() -> None:
    check_game(lambda: LspGame(**CPU), bot=default_bot)
    check_game(lambda: LspGame(**CPU))


@given(texts=st.lists(completions(), min_size=1, max_size=6))
def test_any_string_never_raises_with_prefixes(texts: list[str]) -> None:
    check_any_text_is_legal(lambda: LspGame(**CPU), texts)
    check_any_text_is_legal(lambda: LspGame(**CPU), [" 3 + 4?", *texts])


def test_the_challenger_continues_its_prefix_and_the_judge_writes_the_digit() -> None:
    env = LspGame(**CPU)
    ep = play_texts(env, 0, [" 13 - 5?", "13 - 5 = 8", "It is 18.", "6", "3</Score> extra"])
    assert ep.info["query"] == "What is 13 - 5?" and ep.info["target"] == 8
    challenger = ep.turns[0]
    assert challenger.completion == " 13 - 5?", "the completion is only what the model wrote"
    assert challenger.messages[-1] == {"role": "assistant", "content": CPU["challenger_prefix"], "continue_final": True}
    judge = ep.turns[3]
    assert judge.messages[-1] == {"role": "assistant", "content": "<Score>", "continue_final": True}
    assert "13 - 5 = 8" in judge.messages[0]["content"]
    # R = (1, 0); R_Q = (6, 3): solvers R + R_Q, challenger -V + V_Q = -0.5 + 4.5
    assert ep.rewards["solver_0"] == 7.0 and ep.rewards["solver_1"] == 3.0
    assert ep.rewards["challenger_0"] == 4.0 and ep.metrics["judge_unparseable_rate"] == 0.0


@given(digit=st.text(max_size=6))
def test_r_q_stays_an_integer_in_0_to_7_after_the_prefix(digit: str) -> None:
    ep = play_texts(LspGame(**CPU), 0, [" 2 + 2?", "4", "5", digit, digit])
    r_q = ep.rewards["solver_1"]  # R = 0 for "5"
    assert r_q == int(r_q) and 0 <= r_q <= 7
    if len(digit) == 1 and digit in "01234567":
        assert r_q == int(digit) and ep.metrics["judge_unparseable_rate"] == 0.0
    if digit[:1] in ("8", "9", "") or digit[:1].isalpha():
        assert ep.metrics["judge_unparseable_rate"] == 1.0 and r_q == 0


def test_a_challenger_line_without_arithmetic_is_no_query() -> None:
    ep = play_texts(LspGame(**CPU), 0, [" the capital of France?"])
    assert ep.info["query"] is None and ep.rewards["challenger_0"] == -1.0
    assert "no checkable arithmetic" in ep.info["no_query_reason"]


def test_the_paper_config_writes_no_prefix() -> None:
    paper = load_config("games/lsp/lsp.paper.yaml").game.settings
    assert paper.challenger_prefix == "" and paper.judge_prefix == ""
    ep = play_texts(LspGame(task_reward="verifier", n_solvers=1),
                    0, ["[Start Generation]\nWhat is 1 + 1?\n[End Generation]", "2", "<Score>5</Score>"])
    assert all(t.messages[-1]["role"] == "user" for t in ep.turns)


# ------------------------------------------------------------------ the core hook
def test_chat_prompt_ids_leaves_a_continue_final_message_open() -> None:
    from transformers import AutoTokenizer

    from arena.core.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))
    user = [{"role": "user", "content": "Rate it."}]
    closed = tok.decode(chat_prompt_ids(tok, user))
    opened = tok.decode(chat_prompt_ids(tok, [*user, {"role": "assistant", "content": "<Score>", "continue_final": True}]))
    assert closed.endswith("<|im_start|>assistant\n")
    assert opened == closed + "<Score>", "the prefix follows the reply header and is not closed"
    # an assistant message without the flag is a finished turn, followed by a new reply header
    plain = tok.decode(chat_prompt_ids(tok, [*user, {"role": "assistant", "content": "<Score>"}]))
    assert plain.endswith("<Score><|im_end|>\n<|im_start|>assistant\n")


def test_hf_continues_an_open_assistant_message() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learners"))
    from test_hf_batch import tiny_tokenizer
    from tiny_model import tiny_llama

    from arena.policies.hf import HFPolicy

    policy = HFPolicy(tiny_llama(seed=3), tiny_tokenizer(), name="tiny", max_model_len=128)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    user = {"role": "user", "content": "w10 w11 w12"}
    whole = policy.generate([Request(messages=[user], params=greedy)])[0]
    first, rest = whole.completion_ids[0], whole.completion_ids[1:]
    prefix = {"role": "assistant", "content": f"w3 w{first}", "continue_final": True}
    cont = policy.generate([Request(messages=[user, prefix], params=SamplingParams(temperature=0.0, max_new_tokens=5))])[0]
    assert cont.prompt_ids == [*whole.prompt_ids, first], "the open prefix ends the prompt, with no new reply header"
    assert cont.completion_ids == rest, "greedy decoding continues the prefix exactly as it would have"
    assert approx32(cont.logprobs, scale=LOGITS) == whole.logprobs[1:]
