"""How the console answers when something is wrong: one line, the right status, never a 5xx
for bad input.

- The JSON API (``/api/...``, ``/openapi.json``, ``/call/token``) answers JSON
  ``{"message": ...}``; pages answer an HTML page (or, for a live fragment, a fragment) with
  the same line.
- Bad input: 422 on the API (FastAPI's ``detail`` list kept), 400 on a page.
- 405 carries ``Allow``: every method any route at that path takes.
- The database not answering (a refused or dropped connection, a pool with no connection to
  give, Postgres starting up or out of connection slots, SQLite's disk or lock errors) is 503
  with ``Retry-After``. The outage is logged once when it starts, every ``STILL_DOWN_EVERY``
  seconds while it lasts, and once when a probe finds the database back, never a line (or a
  traceback) per request.
- Anything else is a bug: 500 "internal error (ref …)", and the log line with the traceback
  carries the same reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from frontdesk.db.errors import NotCancellable, NotRetryable, StoreUnavailable, TaskNotFound

log = logging.getLogger("frontdesk.web")

RETRY_AFTER = 5  # seconds: what a 503 tells a client to wait
STILL_DOWN_EVERY = 30.0
PROBE_EVERY = 2.0
API_PREFIXES = ("/api/", "/openapi.json", "/call/token")
# SQLSTATE classes that mean "cannot reach it now": connection exceptions, insufficient
# resources (too many connections), operator intervention (shutting down, starting up).
_DOWN_STATES = ("08", "53", "57P")


class Busy(Exception):
    """The answer would take too long now (e.g. stats still being computed): 503."""


class TooMany(Exception):
    """Rate-limited: 429 with Retry-After."""

    def __init__(self, retry_after: float) -> None:
        super().__init__("too many requests")
        self.retry_after = max(1, int(retry_after + 0.999))


def one_line(exc: BaseException) -> str:
    """``exc`` as one short line for a log (SQLAlchemy's messages carry the SQL on more)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def is_api(path: str) -> bool:
    """Whether ``path`` answers JSON (else it is a page; /api/docs is a page)."""
    return path.startswith(API_PREFIXES) and path != "/api/docs"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or len(seen) > 10:
            continue
        seen.add(id(e))
        yield e
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]


def store_down(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (rather than a bug)."""
    for e in _chain(exc):
        if isinstance(e, (StoreUnavailable, PoolTimeout, OperationalError, InterfaceError)):
            return True
        if isinstance(e, DBAPIError) and e.connection_invalidated:
            return True
        if isinstance(e, (ConnectionError, TimeoutError, socket.gaierror)):
            return True
        state = str(getattr(e, "sqlstate", None) or getattr(e, "pgcode", None) or "")
        if state.startswith(_DOWN_STATES):
            return True
        if type(e).__module__.startswith("asyncpg") and type(e).__name__ in (
            "InterfaceError",
            "ConnectionDoesNotExistError",
        ):
            return True
    return False


class Outage:
    """Logs a database outage as state changes: down, still down, back."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe  # async () -> None; raises while the database is down
        self.refused = 0
        self._task: asyncio.Task[None] | None = None

    def down(self, exc: BaseException) -> None:
        self.refused += 1
        if self._task is None or self._task.done():
            log.warning(
                "the task database is not answering (%s); answering 503 until it is back",
                one_line(exc),
            )
            self.refused = 1
            self._task = asyncio.create_task(self._watch(), name="frontdesk.web.outage")

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        started = last = loop.time()
        while True:
            await asyncio.sleep(PROBE_EVERY)
            try:
                await self.probe()
            except Exception:
                if loop.time() - last >= STILL_DOWN_EVERY:
                    last = loop.time()
                    log.warning(
                        "the task database is still not answering after %.0f s (%d requests "
                        "answered 503)",
                        last - started,
                        self.refused,
                    )
                continue
            log.warning(
                "the task database is answering again after %.0f s (%d requests answered 503)",
                loop.time() - started,
                self.refused,
            )
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
