"""Helpers for tests of background jobs: a real runner (a DBOS executor) on the test's loop,
queueing a job exactly as a call's background tool does, and waiting for its end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from frontdesk.core.jobs import client_for
from frontdesk.core.runner import Runner
from frontdesk.db.store import wait_for


@contextlib.asynccontextmanager
async def running(store: Any, registry: Any, settings: Any) -> AsyncIterator[Runner]:
    """A Runner on ``store`` until the block ends (then stopped, as at a shutdown)."""
    runner = Runner(store, registry, settings)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    waiter = asyncio.ensure_future(runner.started.wait())
    await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()
    try:
        yield runner
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def queue(
    store: Any, settings: Any, tool: str, *, enqueue: bool = True, caller: str = "ada", **args: Any
) -> Any:
    """A background job's row and its enqueue, as agents/patterns.py writes them."""
    row = await store.create(
        caller=caller, tool=tool, pattern="background", department="lab", plugin="kit",
        args=args, note="queued for the runner",
    )  # fmt: skip
    if enqueue:
        await client_for(settings).enqueue(row.id)
    return row


async def finished(store: Any, task_id: int, timeout: float = 30.0) -> Any:
    async def done() -> Any:
        task = await store.get(task_id)
        return task if task.finished else None

    task = await wait_for(store, done, timeout)
    assert task is not None, f"task {task_id} did not finish in {timeout}s"
    return task


async def in_status(store: Any, task_id: int, status: str, timeout: float = 30.0) -> Any:
    async def seen() -> Any:
        task = await store.get(task_id)
        return task if task.status == status else None

    task = await wait_for(store, seen, timeout)
    assert task is not None, f"task {task_id} never became {status}"
    return task


async def start_job(store: Any, task_id: int, owner: str = "runner-test-0") -> Any:
    """What a runner's first write for a job is (core/runner.py ``_begin``), for tests that
    need a running background row without running it."""
    from frontdesk.db.hotpath import Add

    return await store.transition(
        task_id, "running", expect=("queued", "running"), note=f"started by runner {owner}",
        attempts=Add(1), lease_owner=owner, lease_expires_at=None,
    )  # fmt: skip
