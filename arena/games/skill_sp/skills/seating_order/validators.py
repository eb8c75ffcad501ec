"""Exact checker of linear seating puzzles: people in a row of seats 1..n, constraints with one solution.

Contract: {"people": [names], "constraints": [...], "answer": [names from seat 1 to seat n]}. A constraint is
{"type": "left_of" | "right_of" | "next_to" | "not_next_to" | "immediately_left", "a": name, "b": name} or
{"type": "seat" | "not_seat", "a": name, "seat": k} or {"type": "end", "a": name}. All n! orders are tried;
exactly one must satisfy every constraint, the answer. A response is a list of names.
"""

import itertools

PAIR = {
    "left_of": lambda i, j: i < j,
    "right_of": lambda i, j: i > j,
    "next_to": lambda i, j: abs(i - j) == 1,
    "not_next_to": lambda i, j: abs(i - j) != 1,
    "immediately_left": lambda i, j: j - i == 1,
}


def _ok(c, people):
    if not isinstance(c, dict) or c.get("a") not in people:
        return False
    t = c.get("type")
    if t in PAIR:
        return set(c) == {"type", "a", "b"} and c["b"] in people and c["b"] != c["a"]
    if t in ("seat", "not_seat"):
        return set(c) == {"type", "a", "seat"} and c["seat"] in range(1, len(people) + 1)
    return t == "end" and set(c) == {"type", "a"}


def holds(c, seat, n):
    i = seat[c["a"]]
    if c["type"] in PAIR:
        return PAIR[c["type"]](i, seat[c["b"]])
    if c["type"] == "end":
        return i in (0, n - 1)
    return (i == c["seat"] - 1) == (c["type"] == "seat")


def solutions(contract):
    people, n = contract["people"], len(contract["people"])
    out = []
    for order in itertools.permutations(people):
        seat = {p: i for i, p in enumerate(order)}
        if all(holds(c, seat, n) for c in contract["constraints"]):
            out.append(list(order))
            if len(out) > 1:
                break
    return out


def validate(contract):
    if not isinstance(contract, dict) or set(contract) != {"people", "constraints", "answer"}:
        return ['the contract has exactly "people", "constraints", "answer"']
    people = contract["people"]
    if not isinstance(people, list) or not 3 <= len(people) <= 7 or not all(isinstance(p, str) for p in people):
        return ["3..7 people, named by strings"]
    if len(set(people)) != len(people):
        return ["names must be distinct"]
    cons = contract["constraints"]
    if not isinstance(cons, list) or not 1 <= len(cons) <= 20 or not all(_ok(c, people) for c in cons):
        return ["1..20 well-formed constraints about the listed people"]
    found = solutions(contract)
    if len(found) != 1:
        return ["the constraints allow no solution" if not found else "the constraints allow more than one order"]
    if found[0] != contract["answer"]:
        return ["the answer is not the puzzle's solution"]
    return []


def check(contract, response):
    return isinstance(response, list) and response == contract["answer"]
