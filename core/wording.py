"""How frontdesk names things to a caller."""

from __future__ import annotations

_VERBS = ("generate", "create", "run", "start", "build", "make", "get", "fetch", "send")


def task_noun(tool: str) -> str:
    """'generate_report' -> 'report': what a caller would call the thing they asked for."""
    words = tool.split("_")
    if len(words) > 1 and words[0] in _VERBS:
        words = words[1:]
    return " ".join(words)
