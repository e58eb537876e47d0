"""How frontdesk names things to a caller."""

from __future__ import annotations

_VERBS = ("generate", "create", "run", "start", "build", "make", "get", "fetch", "send")

# Tool name -> the noun its ``@tool(noun=...)`` sets. Tool names are global across desks and
# processes (a job is run by name), so this is too; the plugin host fills it at load, and
# every place that names a task (acks, follow-ups, progress, task_status) reads it here.
_NOUNS: dict[str, str] = {}


def task_noun(tool: str) -> str:
    """What a caller would call the thing they asked for: the tool's ``noun=`` if it set one,
    else from its name ('generate_report' -> 'report')."""
    if tool in _NOUNS:
        return _NOUNS[tool]
    words = tool.split("_")
    if len(words) > 1 and words[0] in _VERBS:
        words = words[1:]
    return " ".join(words)


def set_noun(tool: str, noun: str | None) -> None:
    """Record (or, with None, forget) a tool's own noun; called by the plugin host."""
    if noun:
        _NOUNS[tool] = " ".join(noun.split())
    else:
        _NOUNS.pop(tool, None)
