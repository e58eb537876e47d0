"""Two pure ASGI middlewares (Starlette's BaseHTTPMiddleware would buffer the SSE stream):

- ``BodyLimit``: a request body over ``MAX_BODY`` bytes is answered 413 before it is read. A
  declared ``Content-Length`` over the limit is refused at once; a body without one (chunked)
  is counted as it streams and refused the moment it passes the limit. Nothing the console
  takes is larger than a login form or an empty JSON object, so the limit is small.
- ``SecurityHeaders``: every response says ``nosniff``, ``Referrer-Policy: same-origin`` (the
  origin check may fall back on a same-origin Referer), no framing (CSP ``frame-ancestors
  'none'`` and ``X-Frame-Options: DENY``), and a Content-Security-Policy that lets pages run
  only this console's own scripts and styles. The caller page may also connect to the LiveKit
  server and use the microphone.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException

MAX_BODY = 16 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit: an HTTPException, so
    FastAPI's body parsing passes it on as is and the app answers 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over {limit} bytes")


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps({"message": f"the request body is over {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.limit + 1  # unreadable: refuse rather than trust the stream
                if declared > self.limit:
                    await _refuse(send, self.limit)
                    return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watch)
        except BodyTooLarge:
            if not started:
                await _refuse(send, self.limit)


def policy(connect: tuple[str, ...] = ()) -> str:
    """The Content-Security-Policy; ``connect`` adds origins scripts may connect to."""
    sources = " ".join(("'self'", *connect))
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src {sources}",
            "media-src 'self' blob: mediastream:",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        )
    )


def livekit_origins(url: str) -> tuple[str, ...]:
    """What livekit-client connects to for a LIVEKIT_URL: its WebSocket and its HTTPS twin."""
    parts = urlsplit(url)
    if not parts.netloc:
        return ()
    secure = parts.scheme in ("wss", "https")
    return (
        f"{'wss' if secure else 'ws'}://{parts.netloc}",
        f"{'https' if secure else 'http'}://{parts.netloc}",
    )


class SecurityHeaders:
    def __init__(self, app: ASGIApp, call_connect: Callable[[], tuple[str, ...]]) -> None:
        self.app = app
        self.call_connect = call_connect  # LiveKit origins, read per request like the keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connect = self.call_connect() if scope.get("path") == "/call" else ()
        extra = [
            (b"content-security-policy", policy(connect).encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"same-origin"),
            (b"x-frame-options", b"DENY"),
            (b"cross-origin-opener-policy", b"same-origin"),
            (b"permissions-policy", b"microphone=(self), camera=(), geolocation=()"),
        ]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *((k, v) for k, v in extra if k not in names),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)
