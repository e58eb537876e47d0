"""Follow-ups: the call side's watch on the store for its callers' finished, untold tasks.

One watcher per process serves every call in it. It asks the store only when something may
have changed: on SQLite it reads ``PRAGMA data_version`` (a few microseconds, and it moves only
when another connection commits), elsewhere it polls the indexed query on an interval. A task
is offered to its caller's newest live call, which speaks it when the agent is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from frontdesk.core.execution import caller_reason
from frontdesk.core.wording import task_noun
from frontdesk.db.outage import OUTAGE
from frontdesk.db.store import Task, TaskStore

if TYPE_CHECKING:
    from frontdesk.agents.call import Call

log = logging.getLogger("frontdesk.followups")

SUMMARY_LIMIT = 600


def followup_instructions(task: Task) -> str:
    what = task_noun(task.tool)
    if task.status == "succeeded":
        result = task.result
        if isinstance(result, dict) and "summary" in result:
            result = result["summary"]
        text = result if isinstance(result, str) else str(result)
        return (
            f"Tell the caller, briefly and without being asked, that their {what} "
            f"(reference {task.id}) is done: {text[:SUMMARY_LIMIT]}"
        )
    opening = (
        f"Tell the caller, briefly and without being asked, that their {what} "
        f"(reference {task.id}) did not complete."
    )
    # A ToolError's text was written for the caller ("No table for 9 on Friday."): say it.
    # frontdesk's own errors (a crash, a restart) are for operators and stay out.
    reason = caller_reason(task.error)
    if reason is not None:
        opening += f" The reason, to tell them: {reason[:SUMMARY_LIMIT]}\n"
    return f"{opening} Apologise and offer to try again."


class FollowupWatcher:
    def __init__(self, store: TaskStore, interval: float = 0.2) -> None:
        self.store = store
        self.interval = interval
        self.calls: dict[str, list[Call]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._version_conn: sqlite3.Connection | None = None
        self._version: int | None = None
        self._pending: dict[int, Task] = {}
        self.checks = 0

    def add(self, runtime: Call) -> None:
        self.calls.setdefault(runtime.caller, []).append(runtime)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="frontdesk.followups")
        self.poke()

    def remove(self, runtime: Call) -> None:
        calls = self.calls.get(runtime.caller, [])
        if runtime in calls:
            calls.remove(runtime)
        if not calls:
            self.calls.pop(runtime.caller, None)

    def poke(self) -> None:
        """Look now, whatever the data version says (a call started, a desk became active)."""
        self._version = None
        self._wake.set()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._version_conn is not None:
            self._version_conn.close()

    def _changed(self) -> bool:
        if self.store.dialect != "sqlite":
            return True
        try:
            if self._version_conn is None:
                path = self.store.read_engine.url.database or ""
                if path in ("", ":memory:"):
                    return True
                self._version_conn = sqlite3.connect(path, check_same_thread=False)
            version = self._version_conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return True
        changed = version != self._version
        self._version = version
        return changed

    async def _loop(self) -> None:
        while self.calls:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            try:
                if self._changed():
                    self.checks += 1
                    for task in await self.store.pending_followups(list(self.calls)):
                        self._pending[task.id] = task
                self._offer()
            except Exception as exc:
                if not OUTAGE.failed(exc):  # an outage is logged once per process
                    log.exception("follow-up watch failed; retrying")

    def _offer(self) -> None:
        busy: set[int] = set()  # calls that started speaking a follow-up in this pass
        for task_id, task in list(self._pending.items()):
            calls = self.calls.get(task.caller)
            if not calls:
                self._pending.pop(task_id, None)
                continue
            runtime = calls[-1]
            # One at a time per call (the agent is busy until it has spoken), but every call
            # in the process gets its turn in the same pass.
            if id(runtime) in busy or not runtime.is_idle():
                continue
            busy.add(id(runtime))
            self._pending.pop(task_id, None)
            runtime.spawn(self._deliver(runtime, task))

    async def _deliver(self, runtime: Call, task: Any) -> None:
        try:
            delivered = await runtime.deliver(task)
        except Exception as exc:
            if not OUTAGE.failed(exc):
                log.exception("follow-up for task %s failed", task.id)
            delivered = False
        if not delivered:
            self.poke()  # still pending: offer again at the next idle moment
        else:
            self._wake.set()
