"""Validators of the json_lookup skill: the first call looks up a nested path in a JSON document."""

import json

import tools

TOOLS = {"json_get", "list_op", "calculate"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    first = tools.parse_calls(contract["calls"])[0]
    if first["tool"] != "json_get":
        return ["the first call must be json_get"]
    if "." not in first["args"].get("path", ""):
        return ["the path must go at least two levels deep"]
    if not isinstance(json.loads(first["args"]["document"]), dict):
        return ["the document must be a JSON object"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
