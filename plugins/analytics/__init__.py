"""Built-in analytics plugin: one outcome row per call, and live counters from task events.

``on_task_event`` notes, per call and in the background, which departments did work (a
department can act without a handoff being recorded, e.g. a plugin's tool offered to "*").
When the caller says goodbye, the agent calls ``record_call_outcome`` (fire-and-forget, so the
goodbye is not delayed); its task row's result is the call's outcome: departments visited,
handoffs and tasks by status, read through ``ctx.tasks`` (the caller's own tasks and this call's
record). ``frontdesk tasks stats`` summarises durations and counts per department.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from frontdesk.core import ToolContext, hookimpl, tool

# session id -> counters. Bounded: a long-lived runner sees many calls.
_MAX_CALLS = 10_000
_departments: dict[str, set[str]] = defaultdict(set)


@hookimpl
def on_task_event(event: Any) -> None:
    if not event.session_id or event.tool == "record_call_outcome":
        return
    if len(_departments) > _MAX_CALLS:
        _departments.clear()
    if event.department:
        _departments[event.session_id].add(event.department)


@tool(pattern="fire_and_forget", ack="Thank you for calling. Goodbye!")
async def record_call_outcome(ctx: ToolContext) -> dict[str, Any]:
    """Record how this call went. Call it once, when the caller says goodbye."""
    call = await ctx.tasks.this_call()
    handoffs = list(call["handoffs"]) if call else []
    visited = ["triage", *(h["to"] for h in handoffs)]
    tasks = await ctx.tasks.list(this_call=True, limit=None) if ctx.session_id else []
    by_status = Counter(t.status for t in tasks if t.tool != "record_call_outcome")
    return {
        "session_id": ctx.session_id,
        "departments": sorted(set(visited) | _departments.get(ctx.session_id or "", set())),
        "handoffs": len(handoffs),
        "tasks": dict(sorted(by_status.items())),
    }


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    register(record_call_outcome, departments=["*"])
