"""Exact checker of knights-and-knaves puzzles: knights always tell the truth, knaves always lie.

Contract: {"people": [names], "statements": {name: formula}, "answer": {name: "knight" | "knave"}}. A formula
is {"is": [name, "knight" | "knave"]}, {"not": f}, {"and": [f, ...]}, {"or": [f, ...]} or
{"iff": [f, g]}. A person's statement is true exactly when that person is a knight. All 2^n worlds are
tried; exactly one must be consistent, the answer. A response is an answer object.
"""

import itertools

ROLES = ("knight", "knave")


def _formula_ok(f, people, depth=0):
    if depth > 6 or not isinstance(f, dict) or len(f) != 1:
        return False
    (op, arg), = f.items()
    if op == "is":
        return isinstance(arg, list) and len(arg) == 2 and arg[0] in people and arg[1] in ROLES
    if op == "not":
        return _formula_ok(arg, people, depth + 1)
    if op in ("and", "or"):
        return isinstance(arg, list) and 2 <= len(arg) <= 4 and all(_formula_ok(g, people, depth + 1) for g in arg)
    if op == "iff":
        return isinstance(arg, list) and len(arg) == 2 and all(_formula_ok(g, people, depth + 1) for g in arg)
    return False


def truth(f, world):
    (op, arg), = f.items()
    if op == "is":
        return world[arg[0]] == arg[1]
    if op == "not":
        return not truth(arg, world)
    if op == "and":
        return all(truth(g, world) for g in arg)
    if op == "or":
        return any(truth(g, world) for g in arg)
    return truth(arg[0], world) == truth(arg[1], world)


def solutions(contract):
    people = contract["people"]
    out = []
    for roles in itertools.product(ROLES, repeat=len(people)):
        world = dict(zip(people, roles))
        if all(truth(f, world) == (world[who] == "knight") for who, f in contract["statements"].items()):
            out.append(world)
    return out


def validate(contract):
    if not isinstance(contract, dict) or set(contract) != {"people", "statements", "answer"}:
        return ['the contract has exactly "people", "statements", "answer"']
    people, statements = contract["people"], contract["statements"]
    if not isinstance(people, list) or not 2 <= len(people) <= 8 or len(set(map(str, people))) != len(people):
        return ["2..8 people with distinct names"]
    if not all(isinstance(p, str) for p in people):
        return ["names are strings"]
    if not isinstance(statements, dict) or not statements or not set(statements) <= set(people):
        return ["statements map speakers (among the people) to formulas"]
    bad = [who for who, f in statements.items() if not _formula_ok(f, people)]
    if bad:
        return [f"malformed statement of {bad[0]!r}"]
    found = solutions(contract)
    if len(found) != 1:
        return [f"the statements allow {len(found)} solutions, not one"]
    if found[0] != contract["answer"]:
        return ["the answer is not the puzzle's solution"]
    return []


def check(contract, response):
    return isinstance(response, dict) and response == contract["answer"]
