"""The DBOS side of a background job: the one workflow every job runs under, and the durable
steps and sleeps a tool gets through ``ctx.step`` and ``ctx.sleep``.

Importing this module imports dbos and registers the workflow; only a runner process does
(core/runner.py). The workflow takes a task id; which tool runs, with which arguments, is read
from the task's row, so a job's code is found by tool name in the plugins this runner loaded.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dbos import DBOS

from frontdesk.core.jobs import WORKFLOW

if TYPE_CHECKING:
    pass


class JobHost(Protocol):
    async def run_job(self, task_id: int) -> str: ...


_host: list[JobHost] = []


def install(host: JobHost | None) -> None:
    """The runner of this process (DBOS allows one per process); None when it stops."""
    _host[:] = [host] if host is not None else []


@DBOS.workflow(name=WORKFLOW)
async def frontdesk_job(task_id: int) -> str:
    if not _host:
        # A workflow reached a process with no runner (it is stopping): it stays pending,
        # and its restart or another runner resumes it.
        raise RuntimeError("no frontdesk runner in this process")
    return await _host[0].run_job(int(task_id))


class DurableSteps:
    """``ctx.step`` and ``ctx.sleep`` inside a DBOS workflow."""

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        async def call(*a: Any) -> Any:
            value = fn(*a)
            if inspect.isawaitable(value):
                value = await value
            return value

        # Preemptible: a cancelled job stops inside a long step, not only after it.
        return await DBOS.run_step_async({"name": name, "preemptible": True}, call, *args)

    async def sleep(self, seconds: float) -> None:
        await DBOS.sleep_async(seconds)


def is_cancellation(exc: BaseException) -> bool:
    """DBOS's way of ending a workflow that was cancelled (it parks the execution)."""
    from dbos import error

    return isinstance(exc, error.DBOSWorkflowCancelledError)
