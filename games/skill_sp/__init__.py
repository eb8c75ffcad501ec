"""Skill-SP (PROTOCOLS.md §3): the sandbox, the skill library and the skill controller (work in progress)."""
