"""Task updates to the caller's app over LiveKit RPC, and two methods the app can call.

- agent -> app, method ``frontdesk.task``: one call per task event of this caller;
- app -> agent, ``frontdesk.tasks``: the caller's recent tasks;
- app -> agent, ``frontdesk.cancel``: cancel one of the caller's background jobs.

Payloads are documented in docs/deploy.md ("Task updates over RPC"). Isolation is the tools':
only the participant this session serves may call the methods, and only its caller's tasks are
visible; another caller's task id answers "not found", exactly like an unknown id, so ids
cannot be probed.

Events reach ``on_event`` two ways: from the store's observers (writes made in this process,
at once) and from ``watch()``, which polls ``task_events`` for writes made elsewhere (the
background runner is another process, and the store is the only channel between them). Both
paths are de-duplicated, so wiring both is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select

from frontdesk.core.errors import TaskNotFound
from frontdesk.core.jobs import cancel_job
from frontdesk.db.errors import NotCancellable
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.models import utcnow
from frontdesk.db.records import as_utc
from frontdesk.db.store import TaskEvent

if TYPE_CHECKING:
    from frontdesk.db.store import Task, TaskStore

log = logging.getLogger("frontdesk.rpc")

METHOD_TASK = "frontdesk.task"
METHOD_TASKS = "frontdesk.tasks"
METHOD_CANCEL = "frontdesk.cancel"
PAYLOAD_VERSION = 1

# Application error codes (1001-1999 are LiveKit's own).
BAD_REQUEST, FORBIDDEN, NOT_FOUND, CONFLICT = 400, 403, 404, 409

# LiveKit caps an RPC payload at 15 KiB; stay under it with room to spare.
MAX_PAYLOAD_BYTES = 14_000
MAX_RESULT_CHARS = 500
DEFAULT_LIST, MAX_LIST = 20, 50
# LiveKit's "Method not supported at destination": the app does not listen for updates.
_UNSUPPORTED_METHOD = 1400

# On Postgres an event id is taken at INSERT and becomes visible at COMMIT, so a poll can see
# id 101 before id 100 commits. Each poll therefore reads this far back again as well (its
# rows are de-duplicated); SQLite commits one writer at a time, in id order.
REORDER_WINDOW = timedelta(seconds=30)

_tasks_t = TaskRow.__table__
_events_t = TaskEventRow.__table__
# A TaskEvent rebuilt from the log: the event's own columns, the rest from its task. Derived
# from the dataclass so a field added to TaskEvent is picked up here too.
_EVENT_FIELDS = [f.name for f in fields(TaskEvent)]
_EVENT_COLUMNS = [
    (_events_t.c[n] if n in ("task_id", "at", "status", "note") else _tasks_t.c[n]).label(n)
    for n in _EVENT_FIELDS
]


def _iso(value: datetime | None) -> str | None:
    value = as_utc(value)
    return value.isoformat() if value is not None else None


def event_payload(event: TaskEvent) -> dict[str, Any]:
    """The ``frontdesk.task`` payload for one event."""
    return {
        "v": PAYLOAD_VERSION,
        "task_id": event.task_id,
        "tool": event.tool,
        "department": event.department,
        "pattern": event.pattern,
        "status": event.status,
        "progress": event.progress,
        "note": event.note,
        "at": _iso(event.at),
    }


def task_summary(task: Task) -> dict[str, Any]:
    """One entry of the ``frontdesk.tasks`` answer: status, not arguments (which may be
    sensitive and are redacted anyway) and a small result only."""
    entry: dict[str, Any] = {
        "task_id": task.id,
        "tool": task.tool,
        "department": task.department,
        "pattern": task.pattern,
        "status": task.status,
        "progress": task.progress,
        "progress_note": task.progress_note,
        "error": task.error,
        "result": None,
        "created_at": _iso(task.created_at),
        "finished_at": _iso(task.finished_at),
        "delivered": task.delivered_at is not None,
    }
    if task.result is not None:
        text = json.dumps(task.result, default=str)
        if len(text) <= MAX_RESULT_CHARS:
            entry["result"] = task.result
        else:
            entry["result_omitted"] = True
    return entry


def _rpc_error(code: int, message: str, **data: Any) -> Exception:
    from livekit import rtc

    return rtc.RpcError(code, message, json.dumps(data) if data else None)


class TaskRpc:
    """RPC between one call's agent and its caller's app.

    ``local_participant`` is duck-typed: ``perform_rpc(destination_identity=, method=,
    payload=)`` and ``register_rpc_method(name, handler)``, as ``rtc.LocalParticipant`` has.
    ``caller`` is the task-store key (a phone number for SIP); ``participant_identity`` is the
    LiveKit identity to talk to (defaults to ``caller``).
    """

    def __init__(
        self,
        local_participant: Any,
        store: TaskStore,
        caller: str,
        *,
        participant_identity: str | None = None,
        response_timeout: float = 5.0,
        queue_size: int = 1000,
    ) -> None:
        self.local = local_participant
        self.store = store
        self.caller = caller
        self.identity = participant_identity or caller
        self.response_timeout = response_timeout
        self.sent: int = 0
        self.enabled = True  # off once the app says it has no frontdesk.task method
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(queue_size)
        self._sender: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._last_event_id: int | None = None
        self._watching_since: datetime | None = None
        self._registered: list[str] = []

    # -- agent -> app ---------------------------------------------------------------------

    def on_event(self, event: TaskEvent) -> None:
        """A store observer: queue ``frontdesk.task`` for this caller's events, ignore others.

        Synchronous and non-blocking, as observers must be; a sender task keeps order."""
        self._accept(event)

    def _accept(self, event: TaskEvent) -> bool:
        if event.caller != self.caller or not self.enabled:
            return False
        key = (event.task_id, event.status, event.note, _iso(event.at))
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > 2048:
            self._seen.popitem(last=False)
        try:
            self._queue.put_nowait(event_payload(event))
        except asyncio.QueueFull:
            log.warning(
                "rpc: update queue full for %s; dropped an event of task %s",
                self.caller,
                event.task_id,
            )
            return False
        if self._sender is None or self._sender.done():
            try:
                self._sender = asyncio.get_running_loop().create_task(
                    self._send_loop(), name="frontdesk.rpc.sender"
                )
            except RuntimeError:  # no loop: nothing can be sent from here
                log.debug("rpc: event outside an event loop; not sent")
        return True

    async def _send_loop(self) -> None:
        while not self._queue.empty():
            payload = self._queue.get_nowait()
            try:
                await self.local.perform_rpc(
                    destination_identity=self.identity,
                    method=METHOD_TASK,
                    payload=json.dumps(payload),
                    response_timeout=self.response_timeout,
                )
                self.sent += 1
            except Exception as exc:  # the app may be gone or not listening; the call goes on
                if getattr(exc, "code", None) == _UNSUPPORTED_METHOD:
                    log.info("rpc: %s does not handle %s; updates off", self.identity, METHOD_TASK)
                    self.enabled = False
                    while not self._queue.empty():
                        self._queue.get_nowait()
                    return
                log.debug("rpc: %s to %s failed: %r", METHOD_TASK, self.identity, exc)
            finally:
                self._queue.task_done()

    async def flush(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until queued updates are sent."""
        if self._sender is not None and not self._sender.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._sender), timeout)

    # -- events from other processes ------------------------------------------------------

    async def poll(self) -> int:
        """Pass new ``task_events`` of this caller to ``on_event``; returns how many were new.

        The first call only notes where the log ends: history is for ``frontdesk.tasks``."""
        e, t = _events_t, _tasks_t
        async with self.store.read_engine.connect() as conn:
            if self._last_event_id is None or self._watching_since is None:
                self._watching_since = utcnow()
                self._last_event_id = (await conn.execute(select(func.max(e.c.id)))).scalar() or 0
                return 0
            since = max(self._watching_since, utcnow() - REORDER_WINDOW)
            stmt = (
                select(e.c.id, *_EVENT_COLUMNS)
                .join(t, t.c.id == e.c.task_id)
                .where(
                    t.c.caller == self.caller,
                    or_(e.c.id > self._last_event_id, e.c.at >= since),
                )
                .order_by(e.c.id)
                .limit(500)
            )
            rows = (await conn.execute(stmt)).all()
        new = 0
        for r in rows:
            self._last_event_id = max(self._last_event_id, r.id)
            values = {name: r._mapping[name] for name in _EVENT_FIELDS}
            values["at"] = as_utc(values["at"])
            new += self._accept(TaskEvent(**values))
        return new

    def watch(self, interval: float = 0.5) -> asyncio.Task[None]:
        """Poll in the background until ``aclose``: this caller's tasks (indexed by caller),
        their events past the last id seen or inside the reorder window."""

        async def loop() -> None:
            while True:
                try:
                    await self.poll()
                except Exception as exc:  # a database hiccup must not end the updates
                    log.debug("rpc: poll failed: %r", exc)
                await asyncio.sleep(interval)

        self._watcher = asyncio.get_running_loop().create_task(loop(), name="frontdesk.rpc.watch")
        return self._watcher

    # -- app -> agent ---------------------------------------------------------------------

    def register(self) -> None:
        """Register ``frontdesk.tasks`` and ``frontdesk.cancel`` on the local participant."""
        handlers: dict[str, Callable[[Any], Any]] = {
            METHOD_TASKS: self.handle_tasks,
            METHOD_CANCEL: self.handle_cancel,
        }
        for name, handler in handlers.items():
            self.local.register_rpc_method(name, handler)
            self._registered.append(name)

    def _check_caller(self, data: Any) -> dict[str, Any]:
        if getattr(data, "caller_identity", None) != self.identity:
            raise _rpc_error(FORBIDDEN, "only the caller this agent serves may use this method")
        raw = getattr(data, "payload", "") or "{}"
        try:
            request = json.loads(raw)
        except ValueError:
            raise _rpc_error(BAD_REQUEST, "payload must be JSON") from None
        if not isinstance(request, dict):
            raise _rpc_error(BAD_REQUEST, "payload must be a JSON object")
        return request

    async def handle_tasks(self, data: Any) -> str:
        """``frontdesk.tasks``: ``{"status"?: str, "limit"?: int}`` -> ``{"v", "tasks": [...]}``."""
        request = self._check_caller(data)
        status = request.get("status")
        limit = request.get("limit", DEFAULT_LIST)
        if status is not None and not isinstance(status, str):
            raise _rpc_error(BAD_REQUEST, "status must be a string")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise _rpc_error(BAD_REQUEST, "limit must be a positive integer")
        rows = await self.store.list(caller=self.caller, status=status, limit=min(limit, MAX_LIST))
        tasks = [task_summary(t) for t in rows]
        body = {"v": PAYLOAD_VERSION, "tasks": tasks, "truncated": False}
        text = json.dumps(body, default=str)
        while len(text.encode()) > MAX_PAYLOAD_BYTES and tasks:
            tasks.pop()  # newest first, so the oldest go
            body["truncated"] = True
            text = json.dumps(body, default=str)
        return text

    async def handle_cancel(self, data: Any) -> str:
        """``frontdesk.cancel``: ``{"task_id": int}`` -> ``{"v", "task_id", "status"}``."""
        request = self._check_caller(data)
        task_id = request.get("task_id")
        if not isinstance(task_id, int) or isinstance(task_id, bool):
            raise _rpc_error(BAD_REQUEST, "task_id must be an integer")
        try:
            done = await cancel_job(self.store, task_id, by="the caller's app", caller=self.caller)
        except TaskNotFound:
            raise _rpc_error(NOT_FOUND, f"task {task_id} not found", task_id=task_id) from None
        except NotCancellable as exc:
            if exc.reason == "finished":
                raise _rpc_error(
                    CONFLICT, str(exc), task_id=task_id, status=exc.task.status
                ) from None
            if exc.task.pattern == "critical":
                raise _rpc_error(
                    FORBIDDEN,
                    f"task {task_id} is critical and cannot be cancelled",
                    task_id=task_id,
                ) from None
            raise _rpc_error(FORBIDDEN, str(exc), task_id=task_id) from None
        return json.dumps({"v": PAYLOAD_VERSION, "task_id": task_id, "status": done.status})

    # -- lifecycle ------------------------------------------------------------------------

    async def aclose(self, flush_timeout: float = 2.0) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
        await self.flush(flush_timeout)
        if self._sender is not None and not self._sender.done():
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sender
        unregister = getattr(self.local, "unregister_rpc_method", None)
        for name in self._registered:
            if unregister is not None:
                with contextlib.suppress(Exception):  # the room may be gone already
                    unregister(name)
        self._registered.clear()


__all__ = [
    "METHOD_CANCEL",
    "METHOD_TASK",
    "METHOD_TASKS",
    "TaskRpc",
    "event_payload",
    "task_summary",
]
