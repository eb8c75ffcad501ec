"""Validators of the arithmetic skill: reference calculate calls reproduce a numeric answer."""

import tools

TOOLS = {"calculate"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    answer = contract["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return ["the answer must be a number"]
    ops = sum(call["args"].get("expression", "").count(op) for call in tools.parse_calls(contract["calls"])
              for op in "+-*/")
    if ops < 2:
        return ["the task needs at least two operations"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
