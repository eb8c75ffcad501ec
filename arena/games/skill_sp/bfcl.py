"""A loader for BFCL (Berkeley Function Calling Leaderboard) "simple" tasks as held-out Skill-SP tasks.

BFCL is one of the paper's benchmarks; its data ships in the PyPI package ``bfcl-eval``, whose
own dependencies are not needed (``make setup`` installs it with ``--no-deps``, like the
built-in model). The package is found with ``importlib.util.find_spec`` and never imported.
Each task's prompt shows the question and the function's JSON schema and asks for one call in
the game's format; ``bfcl_validators.py`` is its exact checker (BFCL's AST rules, simplified:
see there). Use it with ``game.heldout_source: bfcl_simple`` in ``mode: heldout``.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path

VALIDATORS = Path(__file__).with_name("bfcl_validators.py")
CATEGORY = "simple_python"


def data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("BFCL data not installed: pip install --no-deps bfcl-eval")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _jsonl(path: Path) -> dict[str, dict]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {row["id"]: row for row in rows}


@cache
def load_bfcl(category: str = CATEGORY) -> tuple[dict, ...]:
    """Rows ``{"skill": "bfcl", "task", "contract"}`` of a single-function BFCL category."""
    root = data_dir()
    questions = _jsonl(root / f"BFCL_v4_{category}.json")
    answers = _jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")
    out = []
    for qid, q in questions.items():
        truth = answers.get(qid, {}).get("ground_truth", [])
        if len(q["function"]) != 1 or len(truth) != 1 or len(q["question"][0]) != 1:
            continue  # single call, single turn only
        [(name, params)] = truth[0].items()
        fn = q["function"][0]
        prompt = (
            f"{q['question'][0][0]['content']}\n\nYou can call this function:\n{json.dumps(fn)}\n\n"
            'Reply with one call as JSON: {"tool": "<function name>", "args": {<parameters>}}.'
        )
        out.append({"skill": "bfcl", "task": prompt, "contract": {"function": name, "answer": params}})
    if not out:
        raise ValueError(f"no single-call tasks in BFCL category {category!r}")
    return tuple(out)
