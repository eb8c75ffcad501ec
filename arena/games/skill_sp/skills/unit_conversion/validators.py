"""Validators of the unit_conversion skill: at least one real convert_units call, numeric answer."""

import tools

TOOLS = {"convert_units", "calculate"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    calls = tools.parse_calls(contract["calls"])
    conversions = [c for c in calls if c["tool"] == "convert_units"]
    if not conversions:
        return ["the reference solution must convert units"]
    if any(c["args"].get("from_unit") == c["args"].get("to_unit") for c in conversions):
        return ["a conversion between identical units is not a task"]
    if isinstance(contract["answer"], bool) or not isinstance(contract["answer"], (int, float)):
        return ["the answer must be a number"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
