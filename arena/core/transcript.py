"""Readable transcripts of episodes: who saw what, what each seat said, rewards."""

from __future__ import annotations

import textwrap

from arena.core.types import Episode


def _cut(text: str, width: int | None) -> str:
    if width is not None and len(text) > width:
        text = text[:width] + f" ... [{len(text) - width} more chars]"
    return text


def _indent(text: str, width: int | None) -> str:
    return textwrap.indent(_cut(text, width), "    ")


def format_episode(ep: Episode, max_chars: int | None = 600) -> str:
    """The episode as plain text; prompts repeated verbatim are shown once, and so is each
    system message (the rules), named by the turn that first showed it afterwards."""
    lines = [f"=== {ep.game} episode {ep.episode_id} (seed {ep.seed})"]
    if ep.info:
        lines.append("    " + ", ".join(f"{k}={v}" for k, v in ep.info.items()))
    seen: dict[str, str] = {}
    systems: dict[str, str] = {}  # a system message (the rules) is shown in full once, then named
    for turn in ep.turns:
        parts = []
        for m in turn.messages:
            if m["role"] == "system" and m["content"] in systems:
                parts.append(f"<system> (the same system message as {systems[m['content']]})")
                continue
            if m["role"] == "system":
                systems[m["content"]] = f"{turn.seat}'s turn {turn.index}"
            parts.append(_cut(f"<{m['role']}> {m['content']}", max_chars))  # each message, so rules never hide the ask
        prompt = "\n".join(parts)
        tag = f"[{turn.phase}] {turn.seat} ({turn.role})"
        lines.append("")
        lines.append(f"--- {tag} saw:")
        if prompt in seen:
            lines.append(f"    (the same prompt as {seen[prompt]})")
        else:
            seen[prompt] = turn.seat
            lines.append(_indent(prompt, None))
        lines.append(f"--- {tag} wrote:")
        lines.append(_indent(turn.completion, max_chars))
        action = turn.action if turn.action is None or len(turn.action) <= 80 else turn.action[:77] + "..."
        status = f"action={action!r}" if turn.valid else f"INVALID ({turn.invalid_reason})"
        if turn.retried:
            status += ", retried"
        lines.append(f"    -> {status}, turn reward {turn.reward:+.4f}")
    lines.append("")
    lines.append("--- rewards: " + ", ".join(f"{s} ({ep.roles.get(s, '?')}) {r:+.4f}" for s, r in ep.rewards.items()))
    if ep.metrics:
        lines.append("--- metrics: " + ", ".join(f"{k}={v:.3f}" for k, v in ep.metrics.items()))
    return "\n".join(lines)
