"""The console's JSON API (OpenAPI at /openapi.json, read at /api/docs), and the queries the
pages reuse.

Plain async functions, callable from the pages with ``request.app.state.store``:
- ``task_query(...)``: the listing's parameters (a FastAPI dependency the pages share), as a
  ``TaskQuery`` (filter, limit, before);
- ``list_tasks(store, query)`` -> {"tasks", "next_before"}; ``task_json(task)``;
- ``cancel_task`` / ``retry_task(store, task_id, hub=None)`` -> the task (``NotCancellable`` /
  ``NotRetryable`` when it cannot be done); both are written to the task's events.

Errors are JSON ``{"message": ...}`` (errors.py): 400 a filter that cannot mean anything, 401
no token, 403 another origin or not this machine, 404 unknown id, 409 cannot be done, 413 body
too large, 422 invalid parameter (with FastAPI's ``detail`` list), 503 database not answering
or stats still computing (with Retry-After). Each route's OpenAPI lists the ones it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from frontdesk.agents.programs.web.inputs import (
    Before,
    Contains,
    EventId,
    LastEventId,
    Limit,
    Pattern,
    SessionId,
    SessionText,
    Status,
    TaskId,
    TaskIdQuery,
    Text,
    When,
    Window,
)
from frontdesk.agents.programs.web.sse import EventHub, stream
from frontdesk.core.jobs import cancel_job, retry_job
from frontdesk.db.browse import TaskFilter
from frontdesk.db.records import Task
from frontdesk.db.store import TaskStore

BY = "operator (web)"


class Message(BaseModel):
    message: str


class Invalid(Message):
    detail: list[dict[str, Any]]


_RESPONSES: dict[int, dict[str, Any]] = {
    400: {"model": Message, "description": "a filter that cannot mean anything"},
    404: {"model": Message, "description": "unknown id"},
    409: {"model": Message, "description": "cannot be done in the task's state"},
    422: {"model": Invalid, "description": "an invalid parameter"},
}


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses particular to a route; what any route may answer (401, 403, 413, 503)
    is added to every operation by openapi.py."""
    return {c: _RESPONSES[c] for c in sorted({*codes, 422})}


READ = documented()
WRITE = documented(404, 409)

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
    started_at: str | None
    finished_at: str | None
    delivered_at: str | None
    duration_seconds: float | None


class EventOut(BaseModel):
    at: str
    status: str
    note: str | None


class TaskDetail(TaskOut):
    events: list[EventOut]


class TaskPage(BaseModel):
    tasks: list[TaskOut]
    next_before: int | None


class Counts(BaseModel):
    counts: dict[str, int]
    total: int


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


class ToolStats(BaseModel):
    department: str
    tool: str
    succeeded: int
    failed: int
    cancelled: int
    failure_rate: float | None
    median_seconds: float | None
    p95_seconds: float | None


class Totals(BaseModel):
    succeeded: int
    failed: int
    cancelled: int
    failure_rate: float | None


class Stats(BaseModel):
    window: str
    since: str | None
    computed_at: str
    totals: Totals
    tools: list[ToolStats]
    outcomes: list[Outcome]


# -- the queries (pages call these too) -----------------------------------------------------

_FIELDS = [f.name for f in fields(Task)]
_TIMES = frozenset(f.name for f in fields(Task) if "datetime" in str(f.type))


def task_json(task: Task) -> dict[str, Any]:
    """``Task.to_json`` without its deep copy (dataclasses.asdict copied every argument and
    result, which was most of a listing's time); the values are only serialized."""
    out = {name: getattr(task, name) for name in _FIELDS}
    start, end = task.started_at, task.finished_at
    out["duration_seconds"] = (end - start).total_seconds() if start and end else None
    for name in _TIMES:
        value = out[name]
        if value is not None:
            out[name] = value.isoformat()
    return out


@dataclass(frozen=True)
class TaskQuery:
    where: TaskFilter
    limit: int
    before: int | None


def task_query(
    caller: Text = None,
    caller_contains: Contains = None,
    status: Status = None,
    department: Text = None,
    tool: Text = None,
    tool_contains: Contains = None,
    pattern: Pattern = None,
    session_id: SessionText = None,
    since: When = None,
    until: When = None,
    limit: Limit = 50,
    before: Before = None,
) -> TaskQuery:
    """Which tasks a listing asks for; blank values mean "any". ``since`` is inclusive and
    ``until`` exclusive, on the creation time; ``before`` is the previous page's
    ``next_before``."""
    if since is not None and until is not None and since >= until:
        raise HTTPException(400, "since must be before until")
    where = TaskFilter(
        caller=caller,
        status=status,
        department=department,
        tool=tool,
        pattern=pattern,
        session_id=session_id,
        since=since,
        until=until,
        caller_contains=caller_contains,
        tool_contains=tool_contains,
    )
    return TaskQuery(where, limit, before)


Listing = Annotated[TaskQuery, Depends(task_query)]


async def list_tasks(store: TaskStore, query: TaskQuery) -> dict[str, Any]:
    rows = await store.page(query.where, limit=query.limit, before=query.before)
    return {
        "tasks": [task_json(t) for t in rows],
        "next_before": rows[-1].id if len(rows) == query.limit else None,
    }


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


def plausible_session(session_id: str) -> bool:
    """An id no call can have (too long, or a NUL, which Postgres cannot compare) is unknown."""
    return len(session_id) <= 100 and "\x00" not in session_id


# -- the routes -----------------------------------------------------------------------------


def _store(request: Request) -> TaskStore:
    return request.app.state.store


@router.get("/tasks", response_model=TaskPage, responses=documented(400, 422))
async def get_tasks(request: Request, query: Listing) -> dict[str, Any]:
    """Tasks newest first, 50 to a page unless ``limit`` says otherwise."""
    return await list_tasks(_store(request), query)


@router.get("/tasks/counts", response_model=Counts, responses=documented(400, 422))
async def get_counts(request: Request, query: Listing) -> dict[str, Any]:
    """How many tasks match the filters (``status``, ``limit`` and ``before`` aside), per
    status."""
    counts = await _store(request).status_counts(query.where)
    return {"counts": counts, "total": sum(counts.values())}


@router.get("/tasks/{task_id}", response_model=TaskDetail, responses=documented(404, 422))
async def get_task(request: Request, task_id: TaskId) -> dict[str, Any]:
    """One task with its event timeline (progress notes included)."""
    store = _store(request)
    task = await store.get(task_id)
    return {**task_json(task), "events": await store.events(task_id)}


@router.post("/tasks/{task_id}/cancel", response_model=TaskOut, responses=WRITE)
async def post_cancel(request: Request, task_id: TaskId) -> dict[str, Any]:
    """Cancel a queued or running background job; 409 for anything else."""
    return task_json(await cancel_task(_store(request), task_id, request.app.state.hub))


@router.post("/tasks/{task_id}/retry", response_model=TaskOut, responses=WRITE)
async def post_retry(request: Request, task_id: TaskId) -> dict[str, Any]:
    """Queue a failed background job again (same row and idempotency key); 409 otherwise."""
    return task_json(await retry_task(_store(request), task_id, request.app.state.hub))


@router.get("/calls", response_model=CallPage, responses=READ)
async def get_calls(
    request: Request,
    caller: Text = None,
    caller_contains: Contains = None,
    limit: Limit = 50,
    before: When = None,
) -> dict[str, Any]:
    """Calls newest first, with their handoffs; ``before`` is a start time (``next_before``)."""
    rows = await _store(request).calls(
        caller=caller, caller_contains=caller_contains, limit=limit, before=before
    )
    return {"calls": rows, "next_before": rows[-1]["started_at"] if len(rows) == limit else None}


@router.get("/calls/{session_id}", response_model=CallDetail, responses=documented(404, 422))
async def get_call(request: Request, session_id: SessionId) -> dict[str, Any]:
    """One call: caller, start and end, its handoffs, and its tasks."""
    found = await _store(request).call(session_id) if plausible_session(session_id) else None
    if found is None:
        raise HTTPException(404, f"call {session_id!r} not found")
    return {**found, "tasks": [task_json(t) for t in found["tasks"]]}


@router.get("/stats", response_model=Stats, responses=READ)
async def get_stats(request: Request, window: Window = "day") -> Response:
    """Outcomes per department and tool in a window of creation time: counts per status, the
    failure rate (failed over succeeded plus failed) and the median and p95 duration. Figures
    may be up to 10 s old (``computed_at``)."""
    body = await request.app.state.stats.get_json(window)
    return Response(body, media_type="application/json")  # serialized once per computation


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE"}, **READ},
)
async def get_events(
    request: Request,
    last_event_id: LastEventId = None,
    after: EventId = None,
    task_id: TaskIdQuery = None,
    changes: Annotated[bool, Query(description="also send change events")] = False,
) -> StreamingResponse:
    """Server-sent events, one ``task`` event per task change: ``id:`` is the task_events id,
    ``data:`` the event with its task's caller, tool, department and pattern; a ``change``
    event (no id) whenever the store may have changed otherwise (calls). ``Last-Event-ID``
    (sent by a reconnecting browser) or ``after`` replays what came after that id;
    ``task_id`` narrows the stream to one task."""
    start = last_event_id if last_event_id is not None else after

    def accept(entry: dict[str, Any]) -> bool:
        return task_id is None or entry.get("task_id") == task_id

    return StreamingResponse(
        stream(request.app.state.hub, start, accept, changes=changes),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
