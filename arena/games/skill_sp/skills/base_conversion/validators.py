"""Validators of the base_conversion skill: a real change of base, the answer a digit string."""

import re

import tools

TOOLS = {"convert_base"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    calls = [c for c in tools.parse_calls(contract["calls"]) if c["tool"] == "convert_base"]
    if not calls or any(c["args"].get("from_base") == c["args"].get("to_base") for c in calls):
        return ["the solution must convert between two different bases"]
    if not isinstance(contract["answer"], str) or not re.fullmatch(r"-?[0-9a-z]+", contract["answer"]):
        return ["the answer must be a lowercase digit string"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
