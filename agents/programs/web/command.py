"""The ``frontdesk web`` command: checks, then uvicorn on a socket bound here.

Refused with one line and exit 2, before anything starts: a token shorter than 16 characters,
a non-loopback ``--host`` without ``FRONTDESK_WEB_TOKEN``, a caller-page setting that cannot
work (``FRONTDESK_WEB_CALL``, ``FRONTDESK_WEB_CALL_TOKEN``), a port that cannot be bound, a
database that cannot be opened.

On Ctrl-C or SIGTERM every event stream is ended at once, so the server stops within a second
or two even with browsers holding streams open (uvicorn would otherwise wait for each client).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from typing import Any

import typer

from frontdesk.agents.programs.web.loopback import is_loopback

TOKEN_ENV = "FRONTDESK_WEB_TOKEN"


def web_token() -> str | None:
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def web(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8080, min=0, max=65535, help="Port to listen on (0: any free)."),
    db: str | None = typer.Option(
        None, "--db", help="Database URL (default: FRONTDESK_DATABASE_URL)."
    ),
) -> None:
    """Serve the operator console: tasks, calls and stats, live, with cancel and retry."""
    from frontdesk.agents.programs.web.auth import token_problem
    from frontdesk.agents.programs.web.call import call_access

    token = web_token()
    problem = token_problem(token)
    if problem is not None:
        raise fail(problem)
    if token is None and not is_loopback(host):
        raise fail(f"--host {host} is not loopback: set {TOKEN_ENV} to serve beyond this machine")
    access = call_access()
    problem = access.problem()
    if problem is not None:
        raise fail(problem)
    from frontdesk.core.settings import load_settings

    url = db or load_settings().database_url
    sock = bind(host, port)
    # uvicorn handles SIGINT and SIGTERM while it serves, then raises the signal again under
    # the handlers it found: with Python's own, that is a KeyboardInterrupt (or death by
    # SIGTERM) in the middle of closing the store. Quiet handlers let the close finish.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        asyncio.run(_serve(url, token, access, sock))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    # The server has stopped and the store is closed. Tearing down the interpreter's thousand
    # modules (livekit, onnxruntime, grpc...) would take another second or more; nothing is
    # left to finish, so leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


async def _serve(url: str, token: str | None, access: Any, sock: socket.socket) -> None:
    import uvicorn

    from frontdesk.agents.programs.web.app import create_app
    from frontdesk.core.errors import FrontdeskError
    from frontdesk.core.schema import open_store

    try:
        store = await open_store(url)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    try:
        app = create_app(url, token=token, call_access=access, store=store)
        config = uvicorn.Config(
            app,
            log_level="info",
            access_log=False,
            proxy_headers=True,
            timeout_graceful_shutdown=1,  # a backstop: the streams are ended at the signal
        )
        server = _stopping_streams(uvicorn.Server)(config)
        name, bound = sock.getsockname()[:2]
        shown = f"[{name}]" if ":" in name else name
        auth = "token required" if token else "no token: this machine only"
        typer.echo(
            f"frontdesk web on http://{shown}:{bound} ({auth}; caller page: {access.mode})",
            err=True,
        )
        await server.serve(sockets=[sock])
    finally:
        await store.close()


def _stopping_streams(base: Any) -> Any:
    """``uvicorn.Server`` that ends every SSE stream as soon as it is told to stop."""

    class Server(base):  # type: ignore[misc, valid-type]
        _loop: asyncio.AbstractEventLoop | None = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            hub = getattr(self.config.app.state, "hub", None)
            if hub is not None and self._loop is not None:
                # A signal handler: hand the work to the loop rather than touch its queues.
                self._loop.call_soon_threadsafe(hub.close_streams)
            super().handle_exit(sig, frame)

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets=sockets)

    return Server
