"""A test plugin with one tool per pattern, plus failing and slow ones."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

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


# Where pipeline's steps count their effects (a JSON line per effect), so a test in another
# process can count how often each ran; and a step name after which the job hangs (to be killed).
EFFECTS = "FRONTDESK_TEST_EFFECTS"
HANG_AFTER = "FRONTDESK_TEST_HANG_AFTER"
FAIL_STEP = "FRONTDESK_TEST_FAIL_STEP"
VERSION = "FRONTDESK_TEST_PIPELINE_VERSION"  # "2": a redeploy that changed the last step


def effect(name: str, **extra: object) -> None:
    path = os.environ.get(EFFECTS)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"effect": name, "pid": os.getpid(), "at": time.time(), **extra}))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())


def effects(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@tool(pattern="background")
async def pipeline(ctx: ToolContext, name: str, seconds: float = 0.0) -> dict:
    """Gather, write and draw, as three durable steps (a report's shape)."""
    _count("pipeline")
    done = []
    for step in ("gather", "write", "draw"):

        async def work(step: str = step) -> str:
            await asyncio.sleep(seconds)
            key = f"{ctx.idempotency_key}:{step}"
            effect(step, key=key, task=ctx.task_id)
            if os.environ.get(FAIL_STEP) == step:
                raise RuntimeError(f"{step} failed")
            if step == "draw" and os.environ.get(VERSION) == "2":
                return f"{step} v2"
            return step

        done.append(await ctx.step(step, work))
        if os.environ.get(HANG_AFTER) == step:
            effect(f"hung after {step}", task=ctx.task_id)
            await asyncio.sleep(3600)  # killed here: the step is recorded, the next not begun
    return {"summary": f"Pipeline {name} finished: {', '.join(done)}."}


@tool(pattern="background")
async def nap(ctx: ToolContext, seconds: float) -> dict:
    """Sleep durably, then say when it woke."""

    def start() -> float:
        effect("nap start", task=ctx.task_id)
        return time.time()

    await ctx.step("start", start)  # a step: a resumed job does not start again
    await ctx.sleep(seconds)
    effect("nap woke", task=ctx.task_id)
    return {"summary": f"Woke after {seconds} seconds.", "woke_at": time.time()}


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
            tools=[lookup, charge, note, experiment, pipeline, nap, boom, refuse, sluggish],
        )
    )
    register(
        Department(
            name="archive", description="keeps old records", instructions="You are the archive."
        )
    )
