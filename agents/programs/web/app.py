"""The console's ASGI app: the JSON API, the pages, static assets, login, and live events.

``create_app(store_url, token=..., store=...)`` builds it. The lifespan opens the TaskStore
with its schema at the heads, as every writing process does (unless one is passed in, as
``frontdesk web`` does after checking the database), and starts
the one ``EventHub`` that serves every SSE client. What the pages use lives on ``app.state``:
``store`` (an open TaskStore), ``token`` (None without auth), ``hub`` and ``settings``.

Without a token the app answers loopback clients under a loopback Host only (auth.py); tests
with httpx's ASGITransport therefore use ``base_url="http://127.0.0.1"``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from frontdesk.agents.programs.web import api, auth
from frontdesk.agents.programs.web.sse import EventHub
from frontdesk.db.errors import NotCancellable, NotRetryable, StoreUnavailable, TaskNotFound
from frontdesk.db.store import TaskStore
from frontdesk.db.watch import ChangeWatch

log = logging.getLogger("frontdesk.web")

STATIC = Path(__file__).parent / "static"


def create_app(
    store_url: str,
    *,
    token: str | None = None,
    settings: Any = None,
    store: TaskStore | None = None,
    watch_interval: float = 0.1,
) -> FastAPI:
    """The console on ``store_url``. ``token`` turns auth on; ``store``, if given, is used
    (and left open) instead of opening one; ``watch_interval`` is how often SQLite's data
    version is read for live events."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = store is None
        if store is None:
            from frontdesk.core.schema import open_store

            app.state.store = await open_store(store_url)
        else:
            app.state.store = store
        app.state.hub = EventHub(app.state.store, ChangeWatch(store_url, interval=watch_interval))
        await app.state.hub.start()
        try:
            yield
        finally:
            await app.state.hub.aclose()
            if own:
                await app.state.store.close()

    app = FastAPI(
        title="frontdesk console",
        summary="Task history, calls and stats, live; cancel and retry background jobs.",
        version="1",
        lifespan=lifespan,
        # FastAPI's docs pages load Swagger UI from a CDN; the console uses none at run time.
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.token = token or None
    app.state.settings = settings
    app.state.store_url = store_url
    _errors(app)
    app.include_router(api.router)
    app.include_router(auth.router)
    from frontdesk.agents.programs.web import pages  # the other half: server-rendered HTML

    app.include_router(pages.router)
    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")
    # Outermost, so nothing (404s, static files, the stream) is reachable without the token.
    app.add_middleware(auth.TokenGuard, token=app.state.token)
    return app


def _message(code: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"message": message, **extra}, status_code=code)


def _errors(app: FastAPI) -> None:
    """Every error is JSON with a one-line ``message``; bad input is never a 5xx."""

    @app.exception_handler(TaskNotFound)
    async def not_found(_: Request, exc: TaskNotFound) -> JSONResponse:
        return _message(404, str(exc))

    @app.exception_handler(NotCancellable)
    async def not_cancellable(_: Request, exc: NotCancellable) -> JSONResponse:
        return _message(409, str(exc), status=exc.task.status)

    @app.exception_handler(NotRetryable)
    async def not_retryable(_: Request, exc: NotRetryable) -> JSONResponse:
        return _message(409, str(exc), status=exc.task.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _message(exc.status_code, str(exc.detail), detail=exc.detail)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        detail = [{k: e.get(k) for k in ("loc", "msg", "type")} for e in errors]
        return _message(422, f"{where}: {first.get('msg', 'invalid')}", detail=detail)

    @app.exception_handler(StoreUnavailable)
    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def database(_: Request, exc: Exception) -> JSONResponse:
        # Only "cannot reach it": a statement the database refuses is a bug, answered 500.
        log.warning("database error: %s", exc)
        return _message(503, "the task database is not answering; try again")

    @app.exception_handler(Exception)
    async def bug(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error", exc_info=exc)
        return _message(500, "internal error")
