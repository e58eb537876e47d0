"""The console's other pages: calls (live), one call, stats, the login form, and /api/docs (the
OpenAPI document as a page). Parameters are the API's own types, as in pages.py."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse

from frontdesk.agents.programs.web.api import plausible_session
from frontdesk.agents.programs.web.auth import safe_next
from frontdesk.agents.programs.web.inputs import Contains, SessionId, Text, When, Window
from frontdesk.agents.programs.web.pages import page
from frontdesk.agents.programs.web.templating import STATUSES, render

PAGE_SIZE = 50


async def _calls(
    request: Request, caller: str | None, caller_contains: str | None, before: Any
) -> dict[str, Any]:
    calls = await request.app.state.store.calls(
        caller=caller, caller_contains=caller_contains, limit=PAGE_SIZE, before=before
    )
    form = {"caller": caller, "caller_contains": caller_contains}
    query = urlencode({k: v for k, v in form.items() if v})
    older = None
    if len(calls) == PAGE_SIZE:
        older = "/calls?" + urlencode({**{k: v for k, v in form.items() if v},
                                       "before": calls[-1]["started_at"]})  # fmt: skip
    rows = "/calls/rows?" + urlencode(
        {
            **{k: v for k, v in form.items() if v},
            **({"before": before.isoformat()} if before else {}),
        }
    )
    return {"calls": calls, "form": form, "query": query, "older_url": older, "rows_url": rows}


@page("/calls")
async def calls_page(
    request: Request, caller: Text = None, caller_contains: Contains = None, before: When = None
) -> HTMLResponse:
    """Calls newest first, live: caller, start, end, length, handoffs."""
    return render(request, "calls.html", await _calls(request, caller, caller_contains, before))


@page("/calls/rows")
async def calls_rows(
    request: Request, caller: Text = None, caller_contains: Contains = None, before: When = None
) -> HTMLResponse:
    """The calls table alone, for the live refresh."""
    context = await _calls(request, caller, caller_contains, before)
    return render(request, "fragments/call_rows.html", context)


@page("/calls/{session_id:path}", 404)
async def call_page(request: Request, session_id: SessionId) -> HTMLResponse:
    """One call: its handoffs and its tasks."""
    found = (
        await request.app.state.store.call(session_id) if plausible_session(session_id) else None
    )
    if found is None:
        return render(request, "not_found.html", {"what": f"call {session_id}"}, 404)
    return render(request, "call_detail.html", {"call": found})


def chart_data(stats: dict[str, Any]) -> dict[str, Any]:
    """Outcomes per department and per tool (counts by status), and durations per tool: the
    shapes the stats page's charts draw."""
    finished = list(STATUSES[2:])
    by_dept: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(finished, 0))
    by_tool: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(finished, 0))
    durations: dict[str, dict[str, float | None]] = {}
    for row in stats["outcomes"]:
        by_dept[row["department"]][row["status"]] += row["count"]
        by_tool[row["tool"]][row["status"]] += row["count"]
    for t in stats["tools"]:
        if t["median_seconds"] is not None:
            label = f"{t['tool']} ({t['department']})"
            durations[label] = {"median": t["median_seconds"], "p95": t["p95_seconds"]}
    return {
        "statuses": finished,
        "departments": {k: by_dept[k] for k in sorted(by_dept)},
        "tools": {k: by_tool[k] for k in sorted(by_tool)},
        "durations": dict(sorted(durations.items())),
    }


@page("/stats")
async def stats_page(request: Request, window: Window = "day") -> HTMLResponse:
    """Outcomes, failure rate and durations per department and tool, in a time window."""
    stats = await request.app.state.stats.get(window)
    return render(request, "stats.html", {"stats": stats, "charts": chart_data(stats)})


@page("/login")
async def login_page(request: Request, next: Text = None, failed: Text = None) -> HTMLResponse:
    """The login form (with FRONTDESK_WEB_TOKEN set)."""
    context = {"next": safe_next(next), "failed": failed is not None}
    return render(request, "login.html", context)


def _parameter(p: dict[str, Any]) -> dict[str, Any]:
    """One OpenAPI parameter as the reference shows it."""
    schema = p.get("schema", {})
    kinds = schema.get("anyOf") or [schema]
    types, rules = [], []
    for k in kinds:
        if k.get("type") == "null":
            continue
        types.append(
            " | ".join(map(str, k["enum"])) if "enum" in k else k.get("format", k.get("type", ""))
        )
        for name in ("minimum", "maximum", "maxLength"):
            if name in k:
                rules.append(f"{name} {k[name]}")
    if "default" in schema:
        rules.append(f"default {schema['default']}")
    return {
        "name": p["name"],
        "where": p["in"],
        "required": p.get("required", False),
        "type": " or ".join(types),
        "rules": ", ".join(rules),
        "about": p.get("description") or schema.get("description", ""),
    }


@page("/api/docs")
async def api_docs(request: Request) -> HTMLResponse:
    """The JSON API's reference, read from /openapi.json."""
    operations = [
        {
            "id": op.get("operationId", f"{method}{path}"),
            "method": method.upper(),
            "path": path,
            "summary": op.get("summary", ""),
            "description": op.get("description", "").replace("``", ""),
            "parameters": [_parameter(p) for p in op.get("parameters", [])],
            "responses": [(code, r.get("description", "")) for code, r in op["responses"].items()],
        }
        for path, item in request.app.openapi()["paths"].items()
        for method, op in item.items()
        if "pages" not in op.get("tags", ())
    ]
    return render(request, "api_docs.html", {"operations": operations})
