"""Exact checker of zebra-style house puzzles: the clues must have exactly one solution, the contract's answer.

Contract: {"houses": n, "attributes": {attr: [n distinct values]}, "clues": [...], "answer": {attr: [value of
house 1, ..., house n]}}. A clue is {"type": t, "a": [attr, value], "b": [attr, value]} with t one of same,
not_same, left_of (a's house is somewhere left of b's), right_of, next_to; or {"type": "position" |
"not_position", "a": [attr, value], "house": k} (houses count from 1). A response is an answer object.
"""

import itertools
import math

PAIR_TYPES = {
    "same": lambda i, j: i == j,
    "not_same": lambda i, j: i != j,
    "left_of": lambda i, j: i < j,
    "right_of": lambda i, j: i > j,
    "next_to": lambda i, j: abs(i - j) == 1,
}
MAX_SEARCH = 400_000


def _shape_problems(c):
    if not isinstance(c, dict) or set(c) != {"houses", "attributes", "clues", "answer"}:
        return ['the contract has exactly "houses", "attributes", "clues", "answer"']
    n, attrs = c["houses"], c["attributes"]
    if not isinstance(n, int) or not 2 <= n <= 5:
        return ["houses must be 2..5"]
    if not isinstance(attrs, dict) or not 2 <= len(attrs) <= 4:
        return ["there are 2..4 attributes"]
    for name, values in attrs.items():
        if not isinstance(values, list) or len(values) != n or len(set(map(str, values))) != n:
            return [f"attribute {name!r} needs {n} distinct values"]
    if math.factorial(n) ** len(attrs) > MAX_SEARCH:
        return ["the puzzle is too large to check exactly"]
    if not isinstance(c["clues"], list) or not 1 <= len(c["clues"]) <= 30:
        return ["there are 1..30 clues"]
    for k, clue in enumerate(c["clues"]):
        if not _clue_ok(clue, attrs, n):
            return [f"clue {k} is malformed: {clue!r}"]
    return []


def _ref_ok(ref, attrs):
    return isinstance(ref, list) and len(ref) == 2 and ref[0] in attrs and ref[1] in attrs[ref[0]]


def _clue_ok(clue, attrs, n):
    if not isinstance(clue, dict) or not _ref_ok(clue.get("a"), attrs):
        return False
    if clue.get("type") in PAIR_TYPES:
        return set(clue) == {"type", "a", "b"} and _ref_ok(clue["b"], attrs)
    if clue.get("type") in ("position", "not_position"):
        return set(clue) == {"type", "a", "house"} and clue["house"] in range(1, n + 1)
    return False


def _holds(clue, where):
    """where[attr][value] -> house index (0-based), for the attributes assigned so far; None if undecided."""
    a = clue["a"]
    if a[0] not in where:
        return None
    i = where[a[0]][a[1]]
    if clue["type"] in ("position", "not_position"):
        return (i == clue["house"] - 1) == (clue["type"] == "position")
    b = clue["b"]
    if b[0] not in where:
        return None
    return PAIR_TYPES[clue["type"]](i, where[b[0]][b[1]])


def solutions(c, limit=2):
    """Up to ``limit`` solutions, attribute by attribute, pruning on every clue already decidable."""
    names, n, found = list(c["attributes"]), c["houses"], []

    def search(k, where):
        if len(found) >= limit:
            return
        if k == len(names):
            found.append({a: sorted(where[a], key=where[a].get) for a in names})
            return
        for perm in itertools.permutations(c["attributes"][names[k]]):
            where[names[k]] = {v: i for i, v in enumerate(perm)}
            if all(_holds(cl, where) is not False for cl in c["clues"]):
                search(k + 1, where)
            del where[names[k]]

    search(0, {})
    return found


def validate(contract):
    problems = _shape_problems(contract)
    if problems:
        return problems
    found = solutions(contract)
    if not found:
        return ["the clues contradict each other"]
    if len(found) > 1:
        return ["the clues allow more than one solution"]
    if found[0] != contract["answer"]:
        return ["the answer is not the puzzle's solution"]
    return []


def check(contract, response):
    return isinstance(response, dict) and response == contract["answer"]
