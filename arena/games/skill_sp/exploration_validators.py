"""Validators of the skill-free exploration stream (no skill supplies any): generic contract checks.

Runs in the sandbox as ``validators.py``. A contract with ``calls`` is a tool-use task: its
reference calls (any tool) must reproduce ``answer``. Otherwise the contract needs an
``answer``, and only the K probes' majority vouches for it. ``check`` executes tool-use
responses, and compares other responses with the answer exactly (floats to 1e-6).
"""

import tools


def validate(contract):
    if not isinstance(contract, dict) or "answer" not in contract:
        return ['the contract must be an object with an "answer"']
    if "calls" in contract:
        return tools.validate_tool_contract(contract, set(tools.TOOLS))
    if contract["answer"] in (None, "", [], {}):
        return ["the answer is empty"]
    return []


def check(contract, response):
    if "calls" in contract:
        return tools.check_tool_response(contract, response)
    return tools.same_value(response, contract["answer"], contract.get("tolerance", 1e-6))
