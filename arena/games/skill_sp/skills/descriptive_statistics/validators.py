"""Validators of the descriptive_statistics skill: a describe call over at least four numbers."""

import tools

TOOLS = {"describe", "list_op", "calculate"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    stats = [c for c in tools.parse_calls(contract["calls"]) if c["tool"] == "describe"]
    if not stats:
        return ["the solution must compute a statistic with describe"]
    data = stats[0]["args"].get("numbers")
    if isinstance(data, list) and len(data) < 4:
        return ["use at least four data points"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
