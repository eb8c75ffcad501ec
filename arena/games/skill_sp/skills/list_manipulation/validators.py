"""Validators of the list_manipulation skill: at least two chained list operations."""

import tools

TOOLS = {"list_op"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    if len(tools.parse_calls(contract["calls"])) < 2:
        return ["the task needs at least two list operations"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
