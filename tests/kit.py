"""A test plugin with one tool per pattern, plus failing and slow ones."""

from __future__ import annotations

import asyncio

from frontdesk.core import Department, ToolContext, ToolError, hookimpl, tool

calls: dict[str, int] = {}
cleanups: list[str] = []


def _count(name: str) -> None:
    calls[name] = calls.get(name, 0) + 1


@tool(pattern="interruptible")
async def lookup(ctx: ToolContext, query: str, seconds: float = 0.0) -> str:
    """Look something up in the lab's notes."""
    _count("lookup")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cleanups.append(f"lookup:{ctx.task_id}")
        raise
    return f"The lab notes say {query} is fine."


@tool(pattern="critical")
async def charge(ctx: ToolContext, amount: str, seconds: float = 0.0) -> str:
    """Charge the caller's lab account."""
    _count("charge")
    await asyncio.sleep(seconds)
    return f"Charged {amount} with key {ctx.idempotency_key[:8]}."


@tool(pattern="fire_and_forget", ack="Noted.")
async def note(ctx: ToolContext, text: str, seconds: float = 0.3) -> str:
    """Write a note to the lab log."""
    _count("note")
    await asyncio.sleep(seconds)
    if text == "explode":
        raise RuntimeError("secret internals")
    return "logged"


@tool(pattern="background", ack="I've started the experiment")
async def experiment(ctx: ToolContext, name: str, seconds: float = 0.5) -> dict:
    """Run a long lab experiment."""
    _count("experiment")
    steps = 4
    for i in range(steps):
        await ctx.progress((i + 1) / steps, f"step {i + 1} of {steps}")
        await asyncio.sleep(seconds / steps)
    return {"summary": f"Experiment {name} finished. It went well."}


@tool(pattern="interruptible")
async def boom(ctx: ToolContext) -> str:
    """A tool that always breaks."""
    raise ValueError("password=hunter2 leaked in an internal message")


@tool(pattern="interruptible")
async def refuse(ctx: ToolContext) -> str:
    """A tool that refuses politely."""
    raise ToolError("That lab is closed today.")


@tool(pattern="interruptible", timeout=0.2)
async def sluggish(ctx: ToolContext) -> str:
    """A tool slower than its timeout."""
    await asyncio.sleep(5)
    return "never"


@hookimpl
def register_departments(register) -> None:  # noqa: ANN001
    register(
        Department(
            name="lab",
            description="runs lab lookups, charges and experiments",
            instructions="You are the lab desk.",
            tools=[lookup, charge, note, experiment, boom, refuse, sluggish],
        )
    )
    register(
        Department(
            name="archive", description="keeps old records", instructions="You are the archive."
        )
    )
