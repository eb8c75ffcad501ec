"""Exact checker of BFCL "simple" function-calling tasks (runs in the sandbox as ``validators.py``).

Contract: ``{"function": name, "answer": {param: [acceptable values]}}`` from BFCL's
``possible_answer`` files, where ``""`` among a parameter's values means it may be left out.
A response is one call in the game's format, ``{"tool": name, "args": {...}}`` (or a list
holding one). It is right iff the name matches, no unknown parameter is given, every
parameter without ``""`` is given, and each given value is acceptable. Like BFCL's AST
checker, strings compare case-insensitively with spaces and punctuation ignored, an int
equals the same float, and lists compare element by element.
"""

import re


def _norm(value):
    if isinstance(value, str):
        return re.sub(r"[\s,./\-_*^]", "", value).lower()
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def validate(contract):
    if not isinstance(contract, dict) or not isinstance(contract.get("function"), str):
        return ["a BFCL contract names its function"]
    if not isinstance(contract.get("answer"), dict):
        return ["a BFCL contract maps parameters to acceptable values"]
    return []


def check(contract, response):
    if isinstance(response, list) and len(response) == 1:
        response = response[0]
    if not isinstance(response, dict) or set(response) != {"tool", "args"} or not isinstance(response["args"], dict):
        return False
    if response["tool"] != contract["function"]:
        return False
    answer, args = contract["answer"], response["args"]
    if set(args) - set(answer):
        return False
    for param, accepted in answer.items():
        if param not in args:
            if "" not in accepted:
                return False
            continue
        if _norm(args[param]) not in [_norm(a) for a in accepted if a != ""]:
            return False
    return True
