"""The ``frontdesk web`` command: checks, then uvicorn on a socket bound here.

Refused with one line and exit 2, before anything starts: a non-loopback ``--host`` without
``FRONTDESK_WEB_TOKEN``, a port that cannot be bound, a database that cannot be opened.
"""

from __future__ import annotations

import asyncio
import os
import socket

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
    token = web_token()
    if token is None and not is_loopback(host):
        raise fail(f"--host {host} is not loopback: set {TOKEN_ENV} to serve beyond this machine")
    from frontdesk.core.settings import load_settings

    url = db or load_settings().database_url
    sock = bind(host, port)
    try:
        asyncio.run(_serve(url, token, sock))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


async def _serve(url: str, token: str | None, sock: socket.socket) -> None:
    import uvicorn

    from frontdesk.agents.programs.web.app import create_app
    from frontdesk.core.errors import FrontdeskError
    from frontdesk.core.schema import open_store

    try:
        store = await open_store(url)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    try:
        app = create_app(url, token=token, store=store)
        config = uvicorn.Config(app, log_level="info", access_log=False, proxy_headers=True)
        server = uvicorn.Server(config)
        name, bound = sock.getsockname()[:2]
        shown = f"[{name}]" if ":" in name else name
        auth = "token required" if token else "no token: this machine only"
        typer.echo(f"frontdesk web on http://{shown}:{bound} ({auth})", err=True)
        await server.serve(sockets=[sock])
    finally:
        await store.close()
