"""Built-in tasks plugin: ``task_status``, ``my_tasks`` and ``cancel_task`` in every department.

Each sees only the current caller's tasks: another caller's id answers "not found", exactly as
an id that does not exist, so ids cannot be probed.
"""

from __future__ import annotations

from collections.abc import Callable

from frontdesk.core import (
    NotCancellable,
    Task,
    TaskNotFound,
    ToolContext,
    ToolError,
    hookimpl,
    task_noun,
    tool,
)

OWN_TOOLS = {"task_status", "my_tasks", "cancel_task"}


def describe(task: Task) -> str:
    what = f"{task_noun(task.tool)} (reference {task.id})"
    if task.status == "running" and task.progress is not None:
        note = f", {task.progress_note}" if task.progress_note else ""
        return f"Your {what} is running, about {round(task.progress * 100)}% done{note}."
    if task.status in ("queued", "running"):
        return f"Your {what} is {task.status}."
    if task.status == "succeeded":
        result = task.result
        if isinstance(result, dict):
            result = result.get("summary") or result
        return f"Your {what} is done: {str(result)[:300]}"
    return f"Your {what} {task.status}: {task.error or 'no reason recorded'}."


async def _own(ctx: ToolContext, task_id: int) -> Task:
    try:
        return await ctx.tasks.get(task_id)
    except TaskNotFound:
        raise ToolError(f"I couldn't find a task with reference {task_id} for you.") from None


@tool(pattern="interruptible")
async def task_status(ctx: ToolContext, task_id: int | None = None) -> str:
    """Status and progress of one of the caller's tasks (a report, a payment, a search):
    the one with this reference number, or the latest one if none is given."""
    if task_id is not None:
        return describe(await _own(ctx, task_id))
    for task in await ctx.tasks.list(limit=20):
        if task.tool not in OWN_TOOLS:
            return describe(task)
    return "You don't have any tasks with us yet."


@tool(pattern="interruptible")
async def my_tasks(ctx: ToolContext) -> str:
    """The caller's recent tasks and their status."""
    tasks = [t for t in await ctx.tasks.list(limit=30) if t.tool not in OWN_TOOLS]
    if not tasks:
        return "You don't have any tasks with us yet."
    return " ".join(describe(t) for t in tasks[:5])


@tool(pattern="interruptible")
async def cancel_task(ctx: ToolContext, task_id: int) -> str:
    """Cancel one of the caller's background jobs (such as a report) by reference number.
    Payments and other critical work cannot be cancelled."""
    try:
        task = await ctx.tasks.cancel(task_id)
    except TaskNotFound:
        raise ToolError(f"I couldn't find a task with reference {task_id} for you.") from None
    except NotCancellable as exc:
        if exc.reason == "finished":
            raise ToolError(f"Reference {task_id} has already {exc.task.status}.") from None
        raise ToolError(
            f"Reference {task_id} can't be cancelled; only background jobs like reports can."
        ) from None
    return f"I've cancelled your {task_noun(task.tool)}, reference {task.id}."


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    for spec in (task_status, my_tasks, cancel_task):
        register(spec, departments=["*"])
