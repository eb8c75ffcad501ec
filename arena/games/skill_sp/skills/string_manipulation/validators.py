"""Validators of the string_manipulation skill: text tools only, inputs short enough to quote."""

import tools

TOOLS = {"text_transform", "count_substring", "replace_text", "regex_findall"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    for call in tools.parse_calls(contract["calls"]):
        text = call["args"].get("text")
        if isinstance(text, str) and not text.startswith("$") and len(text) > 200:
            return ["input texts must be at most 200 characters"]
    if contract["answer"] in ("", []):
        return ["an empty answer is not a task"]
    return []


def check(contract, response):
    return tools.check_tool_response(contract, response)
