"""The console's pages, rendered on the server: tasks, one task, calls, one call, stats, login.

Pages read the store as the JSON API does (db/browse.py), so both show the same rows. Live
updates are htmx: each live region re-fetches its own fragment (``/tasks/rows``,
``/tasks/{id}/panel``) when the SSE stream at ``/api/events`` announces a task change, with at
most one request in flight and the latest queued, so a burst of changes costs two reads, and
the last state is never skipped. Cancel and retry are buttons that ask for confirmation and
POST to the JSON API; the API writes each to the task's events.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import QueryParams

from frontdesk.agents.programs.web import call
from frontdesk.agents.programs.web.templating import PATTERNS, STATUSES, render
from frontdesk.core.errors import TaskNotFound
from frontdesk.db.browse import TaskFilter

router = APIRouter(include_in_schema=False)
router.include_router(call.router)

PAGE_SIZE, MAX_PAGE = 50, 200
TEXT_FILTERS = ("caller", "department", "tool")
FIELD_LIMIT = 200  # longer filter text is a typo or a probe; refuse it plainly


class BadFilter(ValueError):
    """A filter the operator typed that cannot mean anything; shown in one line."""


def _store(request: Request) -> Any:
    return request.app.state.store


def _time(name: str, raw: str) -> datetime:
    """``datetime-local`` form values (no zone) are UTC, as every time on these pages is."""
    try:
        value = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadFilter(f"{name} must be a date and time, like 2026-03-01T10:15") from None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def parse_filters(params: QueryParams) -> tuple[TaskFilter, int, int | None, dict[str, str]]:
    """The listing a query string asks for: (filter, limit, before, the form's values).
    Empty fields mean "any", so a submitted form with blanks lists everything."""
    form = {k: params.get(k, "").strip() for k in (*TEXT_FILTERS, "status", "pattern")}
    form.update(since=params.get("since", "").strip(), until=params.get("until", "").strip())
    for key, value in form.items():
        if len(value) > FIELD_LIMIT:
            raise BadFilter(f"{key} is too long")
        if "\x00" in value:  # Postgres cannot compare it, and no stored name holds one
            raise BadFilter(f"{key} has a NUL character")
    if form["status"] and form["status"] not in STATUSES:
        raise BadFilter(f"status must be one of {', '.join(STATUSES)}")
    if form["pattern"] and form["pattern"] not in PATTERNS:
        raise BadFilter(f"pattern must be one of {', '.join(PATTERNS)}")
    since = _time("since", form["since"]) if form["since"] else None
    until = _time("until", form["until"]) if form["until"] else None
    if since is not None and until is not None and since >= until:
        raise BadFilter("since must be before until")
    try:
        limit = int(params.get("limit") or PAGE_SIZE)
        before = int(params["before"]) if params.get("before") else None
    except ValueError:
        raise BadFilter("limit and before must be whole numbers") from None
    if not 1 <= limit <= MAX_PAGE:
        raise BadFilter(f"limit must be between 1 and {MAX_PAGE}")
    where = TaskFilter(
        **{k: form[k] or None for k in (*TEXT_FILTERS, "status", "pattern")},
        since=since,
        until=until,
    )
    return where, limit, before, form


def _query(form: dict[str, str], **extra: Any) -> str:
    pairs = {k: v for k, v in form.items() if v}
    pairs.update({k: v for k, v in extra.items() if v is not None})
    return urlencode(pairs)


async def _listing(request: Request) -> dict[str, Any]:
    where, limit, before, form = parse_filters(request.query_params)
    rows = await _store(request).page(where, limit=limit, before=before)
    older = rows[-1].id if len(rows) == limit else None
    return {
        "tasks": rows,
        "form": form,
        "limit": limit,
        "before": before,
        "rows_url": "/tasks/rows?" + _query(form, limit=limit, before=before),
        "older_url": "/tasks?" + _query(form, limit=limit, before=older) if older else None,
        "newest_url": "/tasks?" + _query(form, limit=limit) if before else None,
    }


def _bad_filter(request: Request, exc: BadFilter, *, fragment: bool = False) -> HTMLResponse:
    if fragment:
        return render(request, "fragments/message.html", {"message": str(exc)}, 400)
    context = {"error": str(exc), "tasks": [], "form": dict(request.query_params)}
    context.update(rows_url=None, older_url=None, newest_url="/tasks", limit=PAGE_SIZE)
    context["form"] = {k: context["form"].get(k, "") for k in (*TEXT_FILTERS, "status", "pattern")}
    context["form"].update(since="", until="")
    return render(request, "tasks.html", context, 400)


@router.get("/")
async def home() -> Response:
    return RedirectResponse("/tasks", status_code=303)


@router.get("/tasks", response_class=HTMLResponse)
async def tasks_page(request: Request) -> HTMLResponse:
    try:
        context = await _listing(request)
    except BadFilter as exc:
        return _bad_filter(request, exc)
    return render(request, "tasks.html", {**context, "error": None})


@router.get("/tasks/rows", response_class=HTMLResponse)
async def task_rows(request: Request) -> HTMLResponse:
    """The table body alone, for the live refresh."""
    try:
        context = await _listing(request)
    except BadFilter as exc:
        return _bad_filter(request, exc, fragment=True)
    return render(request, "fragments/task_rows.html", context)


async def _task(request: Request, task_id: int) -> dict[str, Any] | None:
    store = _store(request)
    try:
        task = await store.get(task_id)
    except TaskNotFound:
        return None
    return {"task": task, "events": await store.events(task_id)}


def _not_found(request: Request, what: str) -> HTMLResponse:
    return render(request, "not_found.html", {"what": what}, 404)


@router.get("/tasks/{task_id}", response_class=HTMLResponse)
async def task_page(request: Request, task_id: int) -> HTMLResponse:
    context = await _task(request, task_id)
    if context is None:
        return _not_found(request, f"task {task_id}")
    return render(request, "task.html", context)


@router.get("/tasks/{task_id}/panel", response_class=HTMLResponse)
async def task_panel(request: Request, task_id: int) -> HTMLResponse:
    context = await _task(request, task_id)
    if context is None:
        return render(request, "fragments/message.html", {"message": "task not found"}, 404)
    return render(request, "fragments/task_panel.html", context)


@router.get("/calls", response_class=HTMLResponse)
async def calls_page(request: Request) -> HTMLResponse:
    caller = request.query_params.get("caller", "").strip()[:FIELD_LIMIT].replace("\x00", "")
    caller = caller or None
    before_raw = request.query_params.get("before", "").strip()
    try:
        before = _time("before", before_raw) if before_raw else None
    except BadFilter as exc:
        return render(
            request, "calls.html", {"calls": [], "caller": caller, "error": str(exc)}, 400
        )
    calls = await _store(request).calls(caller=caller, limit=PAGE_SIZE, before=before)
    older = None
    if len(calls) == PAGE_SIZE:
        older = "/calls?" + urlencode({"caller": caller or "", "before": calls[-1]["started_at"]})
    context = {"calls": calls, "caller": caller, "error": None, "older_url": older}
    return render(request, "calls.html", context)


@router.get("/calls/{session_id:path}", response_class=HTMLResponse)
async def call_page(request: Request, session_id: str) -> HTMLResponse:
    found = await _store(request).call(session_id)
    if found is None:
        return _not_found(request, f"call {session_id}")
    return render(request, "call_detail.html", {"call": found})


def chart_data(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """Outcomes per department and per tool (counts by status), and durations per tool:
    the shapes the stats page's charts draw, from the per (department, tool, status) rows."""
    by_dept: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES[2:], 0))
    by_tool: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES[2:], 0))
    durations: dict[str, dict[str, float | None]] = {}
    for row in outcomes:
        by_dept[row["department"]][row["status"]] += row["count"]
        by_tool[row["tool"]][row["status"]] += row["count"]
        if row["status"] == "succeeded":
            label = f"{row['tool']} ({row['department']})"
            durations[label] = {"median": row["median_seconds"], "p95": row["p95_seconds"]}
    return {
        "statuses": list(STATUSES[2:]),
        "departments": {k: by_dept[k] for k in sorted(by_dept)},
        "tools": {k: by_tool[k] for k in sorted(by_tool)},
        "durations": dict(sorted(durations.items())),
    }


@router.get("/stats", response_class=HTMLResponse)
async def stats_page(request: Request) -> HTMLResponse:
    outcomes = await _store(request).outcomes()
    context = {"outcomes": outcomes, "charts": chart_data(outcomes)}
    return render(request, "stats.html", context)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> HTMLResponse:
    # Only a path on this site may follow a login, never another host.
    target = request.query_params.get("next", "/tasks")
    if not target.startswith("/") or target.startswith("//"):
        target = "/tasks"
    return render(
        request, "login.html", {"next": target, "failed": "failed" in request.query_params}
    )
