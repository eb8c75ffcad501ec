"""A person takes a seat at the terminal.

The prompt is printed (system and user messages), and the reply is read from
standard input until a line holding only ``.`` (or end of input). Whatever is
typed is the completion, exactly like a model's: the game parses it, and an
unusable reply is handled by the game's invalid-output rule.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from arena.policies.base import Completion, Request

END = "."


class HumanPolicy:
    """A :class:`~arena.policies.base.Policy` that asks a person, one request at a time."""

    def __init__(self, name: str = "human", stdin: TextIO | None = None, stdout: TextIO | None = None):
        self.name = name
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [self._ask(req) for req in requests]

    def _ask(self, req: Request) -> Completion:
        out = self.stdout
        out.write(f"\n======== your turn: {req.seat or 'seat'} ========\n")
        for msg in req.messages:
            out.write(f"[{msg['role']}]\n{msg['content']}\n\n")
        out.write(f"Type your reply; end it with a line containing only '{END}'.\n> ")
        out.flush()
        lines: list[str] = []
        for line in self.stdin:
            if line.rstrip("\r\n") == END:
                break
            lines.append(line)
        return Completion(text="".join(lines).rstrip("\n"))
