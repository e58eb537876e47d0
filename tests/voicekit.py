"""Tools for the voice tests: each pattern with an ack, timed by its arguments."""

from __future__ import annotations

import asyncio

from frontdesk.core import Department, ToolContext, hookimpl, tool

calls: dict[str, int] = {}
cleanups: list[str] = []
finished: dict[str, int] = {}


def _count(name: str, into: dict[str, int] = calls) -> None:
    into[name] = into.get(name, 0) + 1


@tool(pattern="interruptible", ack="Let me look that up for you.")
async def probe(ctx: ToolContext, seconds: float = 1.0) -> str:
    """A slow lookup."""
    _count("probe")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cleanups.append(f"probe:{ctx.task_id}")
        raise
    _count("probe", finished)
    return f"slow probe finished after {seconds} seconds"


@tool(pattern="critical", ack="Saving that now, one moment.")
async def save(ctx: ToolContext, what: str, seconds: float = 1.0) -> str:
    """Save something that must not be lost."""
    _count("save")
    await asyncio.sleep(seconds)
    _count("save", finished)
    return f"saved {what}"


@tool(pattern="background", ack="I've started the survey")
async def survey(ctx: ToolContext, seconds: float = 0.5) -> dict:
    """A long background survey."""
    _count("survey")
    await asyncio.sleep(seconds)
    return {"summary": "The survey found three open rooms."}


@hookimpl
def register_departments(register) -> None:  # noqa: ANN001
    register(
        Department(
            name="desk",
            description="slow probes, saves and surveys",
            instructions="You are the voice test desk.",
            tools=[probe, save, survey],
        )
    )
