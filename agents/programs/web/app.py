"""The console's ASGI app: the JSON API, the pages, static assets, login, the caller page, and
live events.

``create_app(store_url, token=..., call=..., store=...)`` builds it. The lifespan opens the
TaskStore with its schema at the heads, as every writing process does (unless one is passed in,
as ``frontdesk web`` does after checking the database), starts the one ``EventHub`` that serves
every SSE client, and the stats service with its own connection. What the pages use lives on
``app.state``: ``store``, ``token`` (None without auth), ``sessions``, ``call_access``, ``hub``,
``stats`` and ``settings``.

Around the routes, outermost first: security headers on every answer, the body limit (413
before a large body is read), and the guard (loopback only without a token, the origin check on
every state-changing request, the token). Without a token the app answers loopback clients
under a loopback Host only; tests with httpx's ASGITransport therefore use
``base_url="http://127.0.0.1"``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from frontdesk.agents.programs.web import api, auth, call, errors, health, openapi
from frontdesk.agents.programs.web.guard import Guard
from frontdesk.agents.programs.web.limits import BodyLimit, SecurityHeaders, livekit_origins
from frontdesk.agents.programs.web.ratelimit import RateLimit
from frontdesk.agents.programs.web.sse import EventHub
from frontdesk.agents.programs.web.stats import StatsService
from frontdesk.db.store import TaskStore
from frontdesk.db.watch import ChangeWatch

STATIC = Path(__file__).parent / "static"


def create_app(
    store_url: str,
    *,
    token: str | None = None,
    call_access: call.CallAccess | None = None,
    settings: Any = None,
    store: TaskStore | None = None,
    watch_interval: float = 0.1,
) -> FastAPI:
    """The console on ``store_url``. ``token`` turns auth on (at least 16 characters);
    ``call_access`` says who may use the caller page (default: nobody); ``store``, if given,
    is used (and left open) instead of opening one; ``watch_interval`` is how often SQLite's
    data version is read for live events."""
    token = token or None
    problem = auth.token_problem(token)
    access = call_access or call.CallAccess()
    problem = problem or access.problem()
    if problem is not None:
        raise ValueError(problem)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = store is None
        if store is None:
            from frontdesk.core.schema import open_store

            app.state.store = await open_store(store_url)
        else:
            app.state.store = store
        app.state.hub = EventHub(app.state.store, ChangeWatch(store_url, interval=watch_interval))
        app.state.stats = StatsService(store_url)
        await app.state.hub.start()
        try:
            yield
        finally:
            await app.state.hub.aclose()
            await app.state.stats.aclose()
            await outage.aclose()
            if own:
                await app.state.store.close()

    app = FastAPI(
        title="frontdesk console",
        summary="Task history, calls and stats, live; cancel and retry background jobs.",
        version="1",
        lifespan=lifespan,
        # Swagger UI would load from a CDN; /api/docs renders the schema on the server instead.
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.token = token
    app.state.sessions = auth.Sessions(token) if token else None
    app.state.call_access = access
    app.state.call_limit = RateLimit(per_key=6, total=60)
    # Per app, not per process: each console (and each test's app) counts its own attempts.
    app.state.login_limit = RateLimit(per_key=10, total=100)
    app.state.counts = {}
    app.state.settings = settings
    app.state.store_url = store_url

    async def probe() -> None:
        await app.state.store.last_event_id()

    outage = errors.Outage(probe)
    errors.install(app, outage)
    app.include_router(api.router)
    app.include_router(health.router)
    app.include_router(auth.router)
    # The pages: tasks (pages.py), and calls, stats, login and docs (views.py) on its router.
    from frontdesk.agents.programs.web import pages, views  # noqa: F401

    app.include_router(pages.router)
    app.include_router(call.router)
    app.state.routes = errors.route_table(
        api.router, health.router, auth.router, pages.router, call.router
    )
    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(Guard, token=token, sessions=app.state.sessions)
    app.add_middleware(BodyLimit)
    app.add_middleware(SecurityHeaders, call_connect=_livekit_connect)
    app.openapi = lambda: openapi.schema(app)  # type: ignore[method-assign]
    return app


def _livekit_connect() -> tuple[str, ...]:
    keys = call.livekit_keys()
    return livekit_origins(keys.url) if keys else ()
