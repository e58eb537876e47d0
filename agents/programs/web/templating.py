"""The console's Jinja2 templates: one autoescaping environment and the filters pages share.

Autoescape is on for every template, so a caller name, a tool's note or an error message is
text, never markup; JSON handed to scripts goes through ``tojson``, which escapes ``<``, ``>``
and ``&`` as well.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.templating import Jinja2Templates

from frontdesk.agents.programs.web.inputs import PATTERNS, STATUSES
from frontdesk.agents.programs.web.storecheck import store_problems

TEMPLATES = Path(__file__).parent / "templates"
FINISHED = STATUSES[2:]
SHORT = 160  # characters of a result or error shown in a listing (the task page has it whole)
_REF = re.compile(r"\(ref ([0-9a-f]{8})\)")


def when(value: datetime | str | None) -> str:
    """A timestamp as operators read it: UTC, to the second."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float | None) -> str:
    if value is None:
        return ""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def between(start: datetime | str | None, end: datetime | str | None) -> str:
    """The span from ``start`` to ``end``, or nothing while either is missing."""
    if start is None or end is None:
        return ""
    a = datetime.fromisoformat(start) if isinstance(start, str) else start
    b = datetime.fromisoformat(end) if isinstance(end, str) else end
    return seconds((b - a).total_seconds())


def duration(task: Any, now: datetime | None = None) -> str:
    """How long a task ran, or has been running; nothing before it started."""
    start, end = task.started_at, task.finished_at
    if start is None:
        return ""
    if end is None:
        if task.status != "running":
            return ""
        end = now or datetime.now(timezone.utc)
    return seconds(max(0.0, (end - start).total_seconds()))


def summary(task: Any) -> str:
    """A finished task's outcome in one short line: its error, or its result."""
    if task.status not in FINISHED:
        return ""
    if task.error:
        text = str(task.error)
    elif task.result is None:
        return ""
    else:
        result = task.result
        text = result if isinstance(result, str) else json.dumps(result, default=str)
    text = " ".join(text.split())
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def error_ref(error: str | None) -> str | None:
    """The log reference an unexpected error carries ("internal error: X (ref 1a2b3c4d)")."""
    found = _REF.search(error or "")
    return found[1] if found else None


def pretty(value: Any) -> str:
    """Stored JSON, indented (escaped by autoescape when it is rendered)."""
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,  # a typo in a template fails its test, not silently
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, seconds=seconds, pretty=pretty, summary=summary)
    env.globals.update(
        between=between,
        duration=duration,
        error_ref=error_ref,
        STATUSES=STATUSES,
        PATTERNS=PATTERNS,
        FINISHED=FINISHED,
    )
    return env


templates = Jinja2Templates(env=_environment())


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, status_code: int = 200
) -> HTMLResponse:
    # Every page says when the store's files are in trouble (its disk nearly full, its files
    # deleted or replaced): the operator sees it without asking /api/health.
    context = {"store_problems": store_problems(request), **(context or {})}
    return templates.TemplateResponse(request, name, context, status_code=status_code)
