"""A fake OpenAI-compatible server on loopback: a real aiohttp app on 127.0.0.1, port 0, in its
own thread and event loop, so the real openai plugin and httpx talk HTTP to it.

It serves ``GET /v1/models`` and ``POST /v1/chat/completions`` (streamed as SSE chunks, as
OpenAI does). Replies come from ``script`` (``{"text": ...}`` or ``{"tool": name,
"arguments": {...}}``); with the script empty it answers ``default_text``. With ``key`` set,
a request without ``Authorization: Bearer <key>`` gets 401.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from typing import Any

from aiohttp import web


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class FakeOpenAI:
    def __init__(
        self, *, key: str | None = None, default_text: str = "Hello from the fake server."
    ) -> None:
        self.key = key
        self.default_text = default_text
        self.script: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []  # {"path", "auth", "body"}
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="fake-openai", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        assert self._ready.wait(10), "fake server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._thread.join(10)

    def _main(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()
        asyncio.get_running_loop().call_soon(asyncio.get_running_loop().stop)

    def _authorized(self, request: web.Request) -> bool:
        return self.key is None or request.headers.get("Authorization") == f"Bearer {self.key}"

    def _record(self, request: web.Request, body: Any = None) -> None:
        self.requests.append(
            {"path": request.path, "auth": request.headers.get("Authorization"), "body": body}
        )

    async def _models(self, request: web.Request) -> web.Response:
        self._record(request)
        if not self._authorized(request):
            return web.json_response(
                {"error": {"message": "Incorrect API key provided"}}, status=401
            )
        return web.json_response(
            {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self._record(request, body)
        if not self._authorized(request):
            return web.json_response(
                {"error": {"message": "Incorrect API key provided"}}, status=401
            )
        reply = self.script.popleft() if self.script else {"text": self.default_text}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.get("text", "")}
            return web.json_response(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake-model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                }
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_chunk({"role": "assistant", "content": ""}))
        if "tool" in reply:
            call = {
                "index": 0,
                "id": f"call_{len(self.requests)}",
                "type": "function",
                "function": {"name": reply["tool"], "arguments": ""},
            }
            await response.write(_chunk({"tool_calls": [call]}))
            args = json.dumps(reply.get("arguments", {}))
            for part in (
                args[: len(args) // 2],
                args[len(args) // 2 :],
            ):  # arguments arrive in pieces
                piece = {"index": 0, "function": {"arguments": part}}
                await response.write(_chunk({"tool_calls": [piece]}))
            await response.write(_chunk({}, "tool_calls"))
        else:
            for word in reply["text"].split(" "):
                await response.write(_chunk({"content": word + " "}))
            await response.write(_chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def dead_url() -> str:
    """An http URL on loopback where nothing listens (the port was bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
