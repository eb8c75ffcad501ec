"""Validators of the date_arithmetic skill: the answer is an ISO date, a day count or a weekday name."""

import datetime
import re

import tools

TOOLS = {"date_add", "date_diff", "weekday"}
WEEKDAYS = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}


def validate(contract):
    problems = tools.validate_tool_contract(contract, TOOLS)
    if problems:
        return problems
    answer = contract["answer"]
    if isinstance(answer, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", answer):
        datetime.date.fromisoformat(answer)
        return []
    if isinstance(answer, int) and not isinstance(answer, bool):
        return []
    if answer in WEEKDAYS:
        return []
    return ["the answer must be an ISO date, a number of days or a weekday name"]


def check(contract, response):
    return tools.check_tool_response(contract, response)
