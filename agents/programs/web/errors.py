"""How the console answers when something is wrong: one line, the right status, never a 5xx
for bad input.

- The JSON API (``/api/...``, ``/openapi.json``, ``/call/token``) answers JSON
  ``{"message": ...}``; pages answer an HTML page (or, for a live fragment, a fragment) with
  the same line.
- Bad input: 422 on the API (FastAPI's ``detail`` list kept), 400 on a page.
- 405 carries ``Allow``: every method any route at that path takes.
- The database not answering (a refused or dropped connection, a pool with no connection to
  give, Postgres starting up or out of connection slots, SQLite's disk or lock errors) is 503
  with ``Retry-After``. The outage is logged once when it starts, every
  ``STILL_DOWN_EVERY`` seconds while it lasts, and once when a probe finds the database back
  (db/outage.py, one log per process), never a line (or a traceback) per request.
- Anything else is a bug: 500 "internal error (ref …)", and the log line with the traceback
  carries the same reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from frontdesk.db.errors import NotCancellable, NotRetryable, StoreUnavailable, TaskNotFound
from frontdesk.db.outage import OUTAGE, one_line, store_down

__all__ = ["one_line", "store_down"]  # here for the console's modules; db/outage.py has them

log = logging.getLogger("frontdesk.web")

RETRY_AFTER = 5  # seconds: what a 503 tells a client to wait
PROBE_EVERY = 2.0
API_PREFIXES = ("/api/", "/openapi.json", "/call/token")


class Busy(Exception):
    """The answer would take too long now (e.g. stats still being computed): 503."""


class TooMany(Exception):
    """Rate-limited: 429 with Retry-After."""

    def __init__(self, retry_after: float) -> None:
        super().__init__("too many requests")
        self.retry_after = max(1, int(retry_after + 0.999))


def is_api(path: str) -> bool:
    """Whether ``path`` answers JSON (else it is a page; /api/docs is a page)."""
    return path.startswith(API_PREFIXES) and path != "/api/docs"


class Outage:
    """The console's side of a database outage: it counts the requests answered 503 and
    probes until the database answers. The log lines (down, still down, back) are the
    process's one outage log (db/outage.py), shared with everything else in the process."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe  # async () -> None; raises while the database is down
        self.refused = 0
        self._task: asyncio.Task[None] | None = None

    def down(self, exc: BaseException) -> None:
        OUTAGE.failed(exc)
        self.refused += 1
        if self._task is None or self._task.done():
            self.refused = 1
            self._task = asyncio.create_task(self._watch(), name="frontdesk.web.outage")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(PROBE_EVERY)
            try:
                await self.probe()
            except Exception as exc:
                OUTAGE.failed(exc)  # "still down" every STILL_DOWN_EVERY s, from there
                continue
            OUTAGE.ok()
            log.info("%d console requests were answered 503 during the outage", self.refused)
            return

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


def route_table(*routers: Any) -> list[tuple[Any, set[str]]]:
    """(path regex, methods) of every route of ``routers``: what a 405's Allow is read from.
    Kept here because FastAPI's own route list nests included routers differently by version."""
    return [
        (route.path_regex, set(route.methods))
        for router in routers
        for route in router.routes
        if getattr(route, "methods", None)
    ]


def allowed_methods(request: Request) -> list[str]:
    """Every method some route at this path answers (the Allow of a 405)."""
    path = request.url.path
    table: list[tuple[Any, set[str]]] = getattr(request.app.state, "routes", [])
    return sorted({m for regex, methods in table if regex.match(path) for m in methods})


def _page(request: Request, code: int, message: str, headers: dict[str, str]) -> Response:
    from frontdesk.agents.programs.web.templating import render

    path = request.url.path
    if path.endswith(("/rows", "/panel")):
        response = render(request, "fragments/message.html", {"message": message}, code)
    else:
        context = {"code": code, "message": message, "back": path}
        response = render(request, "error.html", context, code)
    response.headers.update(headers)
    return response


def answer(
    request: Request, code: int, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    """``message`` as JSON for the API, as a page for a page."""
    headers = dict(headers or {})
    if is_api(request.url.path):
        return JSONResponse({"message": message, **extra}, status_code=code, headers=headers)
    return _page(request, code, message, headers)


def install(app: FastAPI, outage: Outage) -> None:
    @app.exception_handler(TaskNotFound)
    async def not_found(request: Request, exc: TaskNotFound) -> Response:
        return answer(request, 404, str(exc))

    @app.exception_handler(NotCancellable)
    @app.exception_handler(NotRetryable)
    async def conflict(request: Request, exc: NotCancellable | NotRetryable) -> Response:
        return answer(request, 409, str(exc), status=exc.task.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return answer(request, exc.status_code, str(exc.detail), headers, detail=exc.detail)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        message = f"{where}: {first.get('msg', 'invalid')}".replace("\n", " ")[:300]
        if is_api(request.url.path):
            detail = [{k: e.get(k) for k in ("loc", "msg", "type")} for e in errors]
            return answer(request, 422, message, detail=detail)
        return answer(request, 400, message)

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> Response:
        return answer(request, 503, str(exc), {"Retry-After": str(RETRY_AFTER)})

    @app.exception_handler(TooMany)
    async def too_many(request: Request, exc: TooMany) -> Response:
        return answer(request, 429, str(exc), {"Retry-After": str(exc.retry_after)})

    async def database(request: Request, exc: Exception) -> Response:
        # Handled here, not by the catch-all below: Starlette re-raises what reaches that one,
        # and the server would log a traceback per refused request.
        if store_down(exc):
            outage.down(exc)
            message = "the task database is not answering; try again shortly"
            return answer(request, 503, message, {"Retry-After": str(RETRY_AFTER)})
        return _bug(request, exc)

    import asyncpg

    for kind in (DBAPIError, PoolTimeout, StoreUnavailable, OSError, asyncpg.PostgresError,
                 asyncpg.InterfaceError):  # fmt: skip
        app.add_exception_handler(kind, database)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        return _bug(request, exc)


def _bug(request: Request, exc: BaseException) -> Response:
    ref = secrets.token_hex(4)
    log.error(
        "unexpected error (ref %s) on %s %s", ref, request.method, request.url.path, exc_info=exc
    )
    return answer(request, 500, f"internal error (ref {ref})")
