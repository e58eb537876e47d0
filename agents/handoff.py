"""Handoff tools and the context that travels with the caller between desks."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from livekit.agents import RunContext, llm
from livekit.agents.llm import function_tool

if TYPE_CHECKING:
    from frontdesk.agents.call import Call


def transfer_tools(runtime: Call, current: str) -> list[llm.Tool]:
    """``transfer_to_<name>`` for every other desk, triage included, generated from the
    registry so a plugin's department is reachable with no change to our code."""
    tools = []
    for dept in runtime.departments():
        if dept.name == current:
            continue
        tools.append(_transfer_tool(runtime, dept.name, dept.description, dept.keywords))
    return tools


def _transfer_tool(runtime: Call, target: str, description: str, keywords: list[str]) -> llm.Tool:
    topics = f" Topics: {', '.join(keywords)}." if keywords else ""
    schema = {
        "name": f"transfer_to_{target}",
        "description": f"Transfer the caller to the {target} desk, which {description}.{topics}",
        "parameters": {"type": "object", "properties": {}},
    }

    async def handler(raw_arguments: dict[str, Any], context: RunContext) -> Any:
        # Returning only the agent (no message) lets the new desk answer the request itself.
        return await runtime.handoff(target)

    return function_tool(handler, raw_schema=schema)


def carried_context(history: llm.ChatContext, turns: int) -> llm.ChatContext:
    """The last ``turns`` user/assistant messages: enough for the next desk not to ask again,
    without dragging the previous desk's tool calls and instructions along."""
    messages = [
        item
        for item in history.items
        if item.type == "message" and item.role in ("user", "assistant") and item.text_content
    ]
    ctx = llm.ChatContext()
    for item in messages[-turns * 2 :] if turns else []:
        ctx.add_message(role=item.role, content=item.text_content or "")
    return ctx


_FACTS = {
    "name": re.compile(r"\b(?:my name is|this is|i am|i'm)\s+([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)"),
    "account": re.compile(r"\baccount(?:\s+(?:number|no\.?|#))?\s*(?:is\s+)?([A-Z0-9-]{4,})", re.I),
    "room": re.compile(r"\broom\s+(?:number\s+)?(\d{2,5})\b", re.I),
}


def extract_facts(text: str) -> dict[str, str]:
    """What the caller said about themselves, so the next desk does not ask again."""
    found = {}
    for key, pattern in _FACTS.items():
        if m := pattern.search(text):
            found[key] = m.group(1)
    return found
