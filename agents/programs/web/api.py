"""The console's JSON API (OpenAPI at /openapi.json), and the queries the pages reuse.

Plain async functions, callable from the pages with ``request.app.state.store``:
- ``list_tasks(store, where: TaskFilter, limit=50, before=None)`` -> {"tasks", "next_before"}
- ``task_detail(store, task_id)`` -> the task's JSON with its ``events`` (or ``TaskNotFound``)
- ``list_calls(store, caller=None, limit=50, before=None)`` -> {"calls", "next_before"}
- ``call_detail(store, session_id)`` -> the call with ``handoffs`` and ``tasks``, or None
- ``stats(store)`` -> {"outcomes": per department, tool and status: count, median, p95}
- ``cancel_task`` / ``retry_task(store, task_id, hub=None)`` -> the task (``NotCancellable`` /
  ``NotRetryable`` when it cannot be done); both are written to the task's events.

Errors are JSON ``{"message": ...}``: 404 unknown id, 409 cannot be done, 400/422 bad filter
(422 also carries FastAPI's ``detail`` list), 503 database unreachable.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Path, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict

from frontdesk.agents.programs.web.sse import EventHub, stream
from frontdesk.core.jobs import cancel_job, retry_job
from frontdesk.db.browse import TaskFilter
from frontdesk.db.records import Task
from frontdesk.db.store import TaskStore

BY = "operator (web)"
MAX_ID = 2**31 - 1  # tasks.id is a 32-bit integer on Postgres
MAX_LIMIT = 500

Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]
Pattern = Literal["interruptible", "critical", "fire_and_forget", "background"]
# No NUL: Postgres cannot store or compare it, and no name here holds one.
Text = Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")]
Id = Annotated[int, Path(ge=1, le=MAX_ID)]

router = APIRouter(prefix="/api", tags=["api"])


class TaskOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: int
    caller: str
    session_id: str | None
    department: str | None
    tool: str
    pattern: str
    status: str
    args: dict[str, Any] | None
    result: Any = None
    error: str | None
    attempts: int
    lease_owner: str | None
    created_at: str
    finished_at: str | None
    delivered_at: str | None


class EventOut(BaseModel):
    at: str
    status: str
    note: str | None


class TaskDetail(TaskOut):
    events: list[EventOut]


class TaskPage(BaseModel):
    tasks: list[TaskOut]
    next_before: int | None


class CallOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    session_id: str
    caller: str
    started_at: str
    ended_at: str | None
    handoffs: list[dict[str, Any]]


class CallDetail(CallOut):
    tasks: list[TaskOut]


class CallPage(BaseModel):
    calls: list[CallOut]
    next_before: str | None


class Outcome(BaseModel):
    department: str
    tool: str
    status: str
    count: int
    median_seconds: float | None
    p95_seconds: float | None


class Stats(BaseModel):
    outcomes: list[Outcome]


class Message(BaseModel):
    message: str


ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": Message, "description": "unknown id"},
    409: {"model": Message, "description": "cannot be done in this state"},
}


def utc(value: datetime | None) -> datetime | None:
    """Times without a zone are UTC; every time is compared in UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:  # e.g. 0001-01-01T00:00+05:00 is before the first representable year
        raise HTTPException(422, "that time is out of range") from None


# -- the queries (pages call these too) -----------------------------------------------------

_FIELDS = [f.name for f in fields(Task)]
_TIMES = frozenset(f.name for f in fields(Task) if "datetime" in str(f.type))


def task_json(task: Task) -> dict[str, Any]:
    """``Task.to_json`` without its deep copy (dataclasses.asdict copied every argument and
    result, which was most of a listing's time); the values are only serialized."""
    out = {name: getattr(task, name) for name in _FIELDS}
    for name in _TIMES:
        value = out[name]
        if value is not None:
            out[name] = value.isoformat()
    return out


async def list_tasks(
    store: TaskStore, where: TaskFilter, limit: int = 50, before: int | None = None
) -> dict[str, Any]:
    rows = await store.page(where, limit=limit, before=before)
    return {
        "tasks": [task_json(t) for t in rows],
        "next_before": rows[-1].id if len(rows) == limit else None,
    }


async def task_detail(store: TaskStore, task_id: int) -> dict[str, Any]:
    task = await store.get(task_id)
    return {**task_json(task), "events": await store.events(task_id)}


async def list_calls(
    store: TaskStore, caller: str | None = None, limit: int = 50, before: datetime | None = None
) -> dict[str, Any]:
    rows = await store.calls(caller=caller, limit=limit, before=utc(before))
    return {
        "calls": rows,
        "next_before": rows[-1]["started_at"] if len(rows) == limit else None,
    }


async def call_detail(store: TaskStore, session_id: str) -> dict[str, Any] | None:
    found = await store.call(session_id)
    if found is None:
        return None
    return {**found, "tasks": [task_json(t) for t in found["tasks"]]}


async def stats(store: TaskStore) -> dict[str, Any]:
    return {"outcomes": await store.outcomes()}


async def cancel_task(store: TaskStore, task_id: int, hub: EventHub | None = None) -> Task:
    task = await cancel_job(store, task_id, by=BY)
    if hub is not None:
        hub.poke()
    return task


async def retry_task(store: TaskStore, task_id: int, hub: EventHub | None = None) -> Task:
    task = await retry_job(store, task_id, by=BY)
    if hub is not None:
        hub.poke()
    return task


# -- the routes -----------------------------------------------------------------------------


def _store(request: Request) -> TaskStore:
    return request.app.state.store


@router.get("/tasks", response_model=TaskPage)
async def get_tasks(
    request: Request,
    caller: Text = None,
    status: Status | None = None,
    department: Text = None,
    tool: Text = None,
    pattern: Pattern | None = None,
    session_id: Text = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> dict[str, Any]:
    """Tasks newest first. ``before`` is the ``next_before`` of the previous page."""
    since, until = utc(since), utc(until)
    if since is not None and until is not None and since >= until:
        raise HTTPException(400, "since must be before until")
    where = TaskFilter(caller, status, department, tool, pattern, session_id, since, until)
    return await list_tasks(_store(request), where, limit, before)


@router.get("/tasks/{task_id}", response_model=TaskDetail, responses=ERRORS)
async def get_task(request: Request, task_id: Id) -> dict[str, Any]:
    """One task with its event timeline (progress notes included)."""
    return await task_detail(_store(request), task_id)


@router.post("/tasks/{task_id}/cancel", response_model=TaskOut, responses=ERRORS)
async def post_cancel(request: Request, task_id: Id) -> dict[str, Any]:
    """Cancel a queued or running background job; 409 for anything else."""
    return task_json(await cancel_task(_store(request), task_id, request.app.state.hub))


@router.post("/tasks/{task_id}/retry", response_model=TaskOut, responses=ERRORS)
async def post_retry(request: Request, task_id: Id) -> dict[str, Any]:
    """Queue a failed background job again (same row and idempotency key); 409 otherwise."""
    return task_json(await retry_task(_store(request), task_id, request.app.state.hub))


@router.get("/calls", response_model=CallPage)
async def get_calls(
    request: Request,
    caller: Text = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    before: datetime | None = None,
) -> dict[str, Any]:
    """Calls newest first, with their handoffs; ``before`` is a start time (``next_before``)."""
    return await list_calls(_store(request), caller, limit, before)


@router.get("/calls/{session_id}", response_model=CallDetail, responses=ERRORS)
async def get_call(
    request: Request,
    session_id: str,
) -> dict[str, Any]:
    """One call: caller, start and end, its handoffs, and its tasks."""
    # An id no call can have (too long, or a NUL, which Postgres cannot compare) is unknown.
    plausible = len(session_id) <= 100 and "\x00" not in session_id
    found = await call_detail(_store(request), session_id) if plausible else None
    if found is None:
        raise HTTPException(404, f"call {session_id!r} not found")
    return found


@router.get("/stats", response_model=Stats)
async def get_stats(request: Request) -> dict[str, Any]:
    """Outcomes and durations per department and tool."""
    return await stats(_store(request))


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE"}},
)
async def get_events(
    request: Request,
    last_event_id: Annotated[int | None, Header(ge=0, le=2**63 - 1)] = None,
    after: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    task_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> StreamingResponse:
    """Server-sent events, one per task change: ``id:`` is the task_events id, ``data:`` the
    event with its task's caller, tool, department and pattern. ``Last-Event-ID`` (sent by a
    reconnecting browser) or ``after`` replays what came after that id. ``task_id`` narrows
    the stream to one task."""
    start = last_event_id if last_event_id is not None else after

    def accept(entry: dict[str, Any]) -> bool:
        return task_id is None or entry["task_id"] == task_id

    return StreamingResponse(
        stream(request.app.state.hub, start, accept),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
