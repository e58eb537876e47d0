"""The console's task pages, rendered on the server: the tasks list and one task.

Pages take their parameters exactly as the JSON API does (the same annotated types and the
same ``task_query`` dependency), so a bad value is refused by the same rule, as a 400 page
with one line (errors.py), and the pages are in /openapi.json for schemathesis to fuzz (tag
"pages"). Every page answers HEAD as well as GET.

Live updates are htmx: each live region re-fetches its own fragment (``/tasks/rows``,
``/tasks/{id}/panel``) when the SSE stream at ``/api/events`` announces a task change, with at
most one request in flight and the latest queued, so a burst of changes costs two reads and the
last state is never skipped. Cancel and retry are buttons that ask for confirmation and POST to
the JSON API; the API writes each to the task's events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from frontdesk.agents.programs.web.api import Listing, TaskQuery
from frontdesk.agents.programs.web.inputs import TaskId
from frontdesk.agents.programs.web.templating import render
from frontdesk.core.errors import TaskNotFound

router = APIRouter()

COUNTS_TTL = 3.0  # seconds a listing's per-status counts are reused (live refreshes are bursty)
_HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}
PAGE_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"description": "the page", **_HTML}}


def page(path: str, *codes: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a page for GET (documented, tag "pages") and HEAD; ``codes`` are the statuses
    particular to it (404 an unknown id, 303 a redirect)."""
    responses = dict(PAGE_RESPONSES)
    about = {404: {"description": "not found", **_HTML}, 303: {"description": "a redirect"}}
    responses.update({c: about[c] for c in codes})

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        kw: dict[str, Any] = {"response_class": HTMLResponse}
        router.add_api_route(path, fn, methods=["GET"], tags=["pages"], responses=responses, **kw)
        router.add_api_route(path, fn, methods=["HEAD"], include_in_schema=False, **kw)
        return fn

    return register


def _store(request: Request) -> Any:
    return request.app.state.store


def _link(query: TaskQuery, **changes: Any) -> str:
    """The query string of this listing with ``changes`` (None drops a parameter)."""
    w = query.where
    params: dict[str, Any] = {
        "caller": w.caller,
        "caller_contains": w.caller_contains,
        "status": w.status,
        "department": w.department,
        "tool": w.tool,
        "tool_contains": w.tool_contains,
        "pattern": w.pattern,
        "session_id": w.session_id,
        "since": w.since.strftime("%Y-%m-%dT%H:%M:%S") if w.since else None,
        "until": w.until.strftime("%Y-%m-%dT%H:%M:%S") if w.until else None,
        "limit": query.limit if query.limit != 50 else None,
        "before": query.before,
    }
    params.update(changes)
    return urlencode({k: v for k, v in params.items() if v is not None})


async def _counts(request: Request, query: TaskQuery) -> dict[str, int]:
    """Per-status counts for the listing's filters, reused for ``COUNTS_TTL`` seconds."""
    key = replace(query.where, status=None)
    cache: dict[Any, tuple[float, dict[str, int]]] = request.app.state.counts
    now = asyncio.get_running_loop().time()
    hit = cache.get(key)
    if hit is not None and now - hit[0] < COUNTS_TTL:
        return hit[1]
    counts = await _store(request).status_counts(key)
    if len(cache) > 256:
        cache.clear()
    cache[key] = (now, counts)
    return counts


async def _listing(request: Request, query: TaskQuery) -> dict[str, Any]:
    rows = await _store(request).page(query.where, limit=query.limit, before=query.before)
    older = rows[-1].id if len(rows) == query.limit else None
    return {
        "tasks": rows,
        "query": query,
        "link": lambda **changes: "/tasks?" + _link(query, **changes),
        "counts": await _counts(request, query),
        "rows_url": "/tasks/rows?" + _link(query),
        "older_url": "/tasks?" + _link(query, before=older) if older else None,
        "newest_url": "/tasks?" + _link(query, before=None) if query.before else None,
    }


@page("/", 303)
async def home() -> Response:
    """To the tasks list."""
    return RedirectResponse("/tasks", status_code=303)


@page("/tasks")
async def tasks_page(request: Request, query: Listing) -> HTMLResponse:
    """Tasks newest first, with the API's filters, counts per status, cancel and retry."""
    return render(request, "tasks.html", await _listing(request, query))


@page("/tasks/rows")
async def task_rows(request: Request, query: Listing) -> HTMLResponse:
    """The listing alone (counts, rows, pager), for the live refresh."""
    return render(request, "fragments/listing.html", await _listing(request, query))


async def _task(request: Request, task_id: int) -> dict[str, Any] | None:
    store = _store(request)
    try:
        task = await store.get(task_id)
    except TaskNotFound:
        return None
    return {"task": task, "events": await store.events(task_id)}


@page("/tasks/{task_id}", 404)
async def task_page(request: Request, task_id: TaskId) -> HTMLResponse:
    """One task: its fields, arguments, result or error, and its timeline."""
    context = await _task(request, task_id)
    if context is None:
        return render(request, "not_found.html", {"what": f"task {task_id}"}, 404)
    return render(request, "task.html", context)


@page("/tasks/{task_id}/panel", 404)
async def task_panel(request: Request, task_id: TaskId) -> HTMLResponse:
    """One task's changing part, for the live refresh."""
    context = await _task(request, task_id)
    if context is None:
        return render(request, "fragments/message.html", {"message": "task not found"}, 404)
    return render(request, "fragments/task_panel.html", context)
