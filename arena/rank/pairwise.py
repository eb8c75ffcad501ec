"""``python -m arena.eval pairwise CONFIG``: win rate of a candidate policy against a base, AlpacaEval-style.

    python -m arena.eval pairwise games/lsp/lsp.yaml --set policies.learner.model=runs/lsp/checkpoints/step_000006 \\
        --candidate learner --base judge --judge judge --limit 100

Both policies answer each held-out instruction (``--data``: a JSONL file of
``{"instruction": ...}`` lines, optional ``"id"``; default: the 100 instructions
shipped in ``arena/games/lsp/data/instructions.jsonl``, written for this project).
The judge, any policy the config names (the frozen built-in model on CPU, a
strong model behind an OpenAI-compatible server on a real setup), sees the
instruction and the two answers as (a) and (b) and names the better one. Each
pair is judged in BOTH orders to cancel position bias.

Per instruction the candidate scores ``s = (w_1 + w_2) / 2``, with ``w = 1`` when
the judge picks the candidate's answer, 0 when it picks the base's, 0.5 when the
verdict is unparseable. The win rate is ``mean s`` over instructions, with a 95%
percentile-bootstrap interval over instructions (:func:`arena.stats.heldout.bootstrap`).
Also reported: the share of verdicts naming (a) (position bias) and of
unparseable verdicts.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from arena.core.errors import OneLineParser
from arena.core.types import ChatMessage
from arena.policies.base import Policy, Request, SamplingParams

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "games" / "lsp" / "data" / "instructions.jsonl"

JUDGE_PROMPT = (
    "You are comparing two AI assistants' responses to the same instruction. Pick the response that "
    "follows the instruction better: more helpful, accurate and clearly written.\n\n"
    "## Instruction\n{instruction}\n\n## Response (a)\n{a}\n\n## Response (b)\n{b}\n\n"
    "Which response is better? Reply with exactly 'Output (a)' or 'Output (b)'."
)

Verdict = Literal["a", "b"]


@dataclass(frozen=True)
class Instruction:
    id: str
    instruction: str


def load_instructions(path: str | Path | None = None, limit: int | None = None) -> list[Instruction]:
    """Instructions from a JSONL file (``instruction`` required, ``id`` optional); errors name the line."""
    path = Path(path) if path is not None else DEFAULT_DATA
    out: list[Instruction] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("instruction"), str) or not row["instruction"].strip():
            raise ValueError(f"{path}:{n}: expected an object with a non-empty 'instruction' string")
        out.append(Instruction(id=str(row.get("id", f"{path.stem}-{n}")), instruction=row["instruction"]))
    if not out:
        raise ValueError(f"{path}: no instructions")
    return out[:limit] if limit else out


def judge_messages(instruction: str, a: str, b: str) -> list[ChatMessage]:
    return [{"role": "user", "content": JUDGE_PROMPT.format(instruction=instruction, a=a, b=b)}]


_VERDICT = re.compile(r"\(\s*([ab])\s*\)", re.IGNORECASE)
_BARE = re.compile(r"^\W*(?:output|response)?\W*([ab])\b", re.IGNORECASE)


def parse_verdict(text: str) -> Verdict | None:
    """The last ``(a)`` / ``(b)`` in the judge's reply, else a reply that starts with a bare a / b; else None."""
    found = _VERDICT.findall(text)
    if found:
        return found[-1].lower()  # type: ignore[return-value]
    bare = _BARE.match(text)
    return bare.group(1).lower() if bare else None  # type: ignore[return-value]


def pair_score(first: Verdict | None, second: Verdict | None) -> float:
    """Candidate's score for one instruction: shown as (a) in the first order, as (b) in the second."""
    w1 = 0.5 if first is None else float(first == "a")
    w2 = 0.5 if second is None else float(second == "b")
    return (w1 + w2) / 2


def _generate(policy: Policy, chats: Sequence[list[ChatMessage]], params: SamplingParams, salt: int) -> list[str]:
    requests = [Request(messages=list(m), params=params, seed=salt * 1_000_003 + i) for i, m in enumerate(chats)]
    return [c.text for c in policy.generate(requests)]


def compare(
    instructions: Sequence[Instruction],
    candidate: Policy,
    base: Policy,
    judge: Policy,
    answer_params: SamplingParams,
    judge_params: SamplingParams,
    seed: int = 0,
) -> tuple[dict[str, float], list[dict]]:
    """Answer, judge both orders, summarise: (summary, one record per instruction)."""
    from arena.stats.heldout import bootstrap

    chats = [[{"role": "user", "content": x.instruction}] for x in instructions]
    cand = _generate(candidate, chats, answer_params, seed)
    ref = _generate(base, chats, answer_params, seed)
    orders = [judge_messages(x.instruction, c, r) for x, c, r in zip(instructions, cand, ref, strict=True)]
    orders += [judge_messages(x.instruction, r, c) for x, c, r in zip(instructions, cand, ref, strict=True)]
    verdicts_text = _generate(judge, orders, judge_params, seed + 1)
    n = len(instructions)
    records = []
    for i, x in enumerate(instructions):
        v1, v2 = parse_verdict(verdicts_text[i]), parse_verdict(verdicts_text[n + i])
        records.append(asdict(x) | {
            "candidate": cand[i], "base": ref[i], "judge_candidate_first": verdicts_text[i],
            "judge_base_first": verdicts_text[n + i], "verdicts": [v1, v2], "score": pair_score(v1, v2),
        })
    mean, low, high = bootstrap([r["score"] for r in records], seed=seed) if n > 1 else (records[0]["score"],) * 3
    verdicts = [v for r in records for v in r["verdicts"]]
    summary = {
        "win_rate": mean, "low": low, "high": high, "n": float(n),
        "win_rate_candidate_first": sum(r["verdicts"][0] == "a" for r in records) / n,
        "win_rate_candidate_second": sum(r["verdicts"][1] == "b" for r in records) / n,
        "a_rate": sum(v == "a" for v in verdicts) / len(verdicts),
        "unparseable_rate": sum(v is None for v in verdicts) / len(verdicts),
    }
    return summary, records


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m arena.eval pairwise", description=__doc__.split("\n")[0])
    p.add_argument("config", help="YAML config (e.g. games/lsp/lsp.yaml) or a registered game name")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--candidate", default=None, help="policy to evaluate (default: the trainable one)")
    p.add_argument("--base", required=True, help="policy it is compared against (e.g. a frozen base model)")
    p.add_argument("--judge", required=True, help="policy that judges (any policy in the config)")
    p.add_argument("--data", type=Path, default=None, help="JSONL of {'instruction': ...} (default: the shipped 100)")
    p.add_argument("--limit", type=int, default=None, help="use the first N instructions")
    p.add_argument("--max-new-tokens", type=int, default=256, help="answer budget (default 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="answer temperature (default 0: greedy; paper 0.01)")
    p.add_argument("--judge-max-new-tokens", type=int, default=16, help="judge budget (default 16)")
    p.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    p.add_argument("--json", type=Path, default=None, help="write the summary and every record here")
    return p


def main(argv: list[str] | None = None) -> int:
    from arena.core.errors import ConfigError, check_output_file, check_range
    from arena.loop.config import load_config

    args = build_parser().parse_args(argv)
    check_output_file("--json", args.json)
    check_range("--max-new-tokens", args.max_new_tokens, 1)
    check_range("--judge-max-new-tokens", args.judge_max_new_tokens, 1)
    check_range("--seed", args.seed, 0)
    if not 0 <= args.temperature < float("inf"):  # NaN fails too
        raise ConfigError(f"--temperature: must be a finite number >= 0 (got {args.temperature})")
    cfg = load_config(args.config, args.overrides)
    candidate = args.candidate or cfg.trainable
    if candidate is None:
        raise ConfigError("--candidate: the config has no trainable policy; name the policy to evaluate")
    for flag, name in (("--candidate", candidate), ("--base", args.base), ("--judge", args.judge)):
        if name not in cfg.policies:
            raise ConfigError(f"{flag}: unknown policy {name!r}; known: {', '.join(cfg.policies)}")
    if args.limit is not None and args.limit < 2:
        raise ConfigError(f"--limit: at least 2 instructions make an interval (got {args.limit})")
    try:
        instructions = load_instructions(args.data, args.limit)
    except FileNotFoundError:
        raise ConfigError(f"--data: no such file {args.data}") from None
    except ValueError as e:
        raise ConfigError(f"--data: {e}") from None
    except OSError as e:  # a directory, a file it may not read
        raise ConfigError(f"--data: cannot read {args.data} ({e.strerror or e})") from None
    from arena.loop.build import build_policies

    policies = build_policies(cfg, names=dict.fromkeys([candidate, args.base, args.judge]))
    answer = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    judging = SamplingParams(temperature=0.0, max_new_tokens=args.judge_max_new_tokens)
    summary, records = compare(
        instructions, policies[candidate], policies[args.base], policies[args.judge], answer, judging, args.seed
    )
    print(f"pairwise: {candidate} vs {args.base}, judged by {args.judge}, {len(instructions)} instructions, both orders")
    print(f"win rate {summary['win_rate']:.3f}  95% interval [{summary['low']:.3f}, {summary['high']:.3f}]")
    print(f"candidate first {summary['win_rate_candidate_first']:.3f}, second {summary['win_rate_candidate_second']:.3f}; "
          f"judge picks (a) {summary['a_rate']:.3f}, unparseable {summary['unparseable_rate']:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "records": records}, indent=2))
    return 0
