"""The console under test: through httpx's ASGI transport, or served by uvicorn on loopback.

Without a token the app answers loopback Host names only, so clients use http://127.0.0.1.
The ASGI client sends ``Origin: http://127.0.0.1`` on every request, as a browser on the
console's own pages does; a test of the origin check sets or removes it itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from frontdesk.agents.programs.web import create_app

ORIGIN = {"Origin": "http://127.0.0.1"}


@contextlib.asynccontextmanager
async def console(url: str, **options: Any) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """(app, client): the app's lifespan runs around the client."""
    client_options = options.pop("client", {})
    app = create_app(url, **options)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, **client_options)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=ORIGIN
        ) as c:
            yield app, c


@contextlib.asynccontextmanager
async def served(url: str, **options: Any) -> AsyncIterator[tuple[Any, str]]:
    """(app, base URL): a real uvicorn on 127.0.0.1, port picked by the OS (SSE needs a
    real stream; the ASGI transport buffers whole responses)."""
    import uvicorn

    app = create_app(url, **options)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


class Events:
    """An SSE client: ``await next()`` returns the next task event (id, data)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()
        self.connected = asyncio.Event()

    async def next(self, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
        return await asyncio.wait_for(self._next(), timeout)

    async def _next(self) -> tuple[int, dict[str, Any]]:
        event_id, data = None, None
        async for line in self.lines:
            if line == ": connected":
                self.connected.set()
            elif line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and data is not None:
                assert event_id is not None
                return event_id, data
        raise EOFError("the stream ended")

    async def until(self, predicate: Any, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
        async def find() -> tuple[int, dict[str, Any]]:
            while True:
                item = await self._next()
                if predicate(item[1]):
                    return item

        return await asyncio.wait_for(find(), timeout)


@contextlib.asynccontextmanager
async def subscribe(
    base: str, headers: dict[str, str] | None = None, params: dict[str, Any] | None = None
) -> AsyncIterator[Events]:
    """An open /api/events stream, returned once the server has registered it."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        async with client.stream(
            "GET", "/api/events", headers=headers or {}, params=params
        ) as response:
            assert response.status_code == 200, response.status_code
            events = Events(response)
            # The first chunk is the "connected" comment, sent after the hub subscription.
            first = await asyncio.wait_for(events.lines.__anext__(), 10)
            assert first.startswith("retry:"), first
            yield events
