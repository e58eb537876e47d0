"""Who may reach the console, decided before any route runs (a pure ASGI middleware, so the
SSE stream is not buffered). In order:

1. **No token: this machine only.** Only loopback clients under a loopback ``Host`` name, so a
   web page elsewhere cannot reach the console through DNS rebinding.
2. **State-changing requests come from this site**, in every mode: a POST (any method but
   GET, HEAD and OPTIONS) must carry an ``Origin``, or failing that a ``Referer``, naming this
   console's own scheme, host and port; anything else is 403, whether or not it is
   authenticated, because a browser sends the login cookie along with a forged form. A request
   with neither header is refused unless it carries the bearer token, which no other site can
   make a browser send.
3. **Operator pages, the API and the event stream need the token** (``Authorization: Bearer``
   or a session cookie from ``POST /login``), when there is one. ``/login``, ``/logout``,
   ``/static/`` and the caller page (``/call``, whose access is its own setting, call.py) do
   not.

Refused: API paths get JSON (401 with ``WWW-Authenticate: Bearer``, or 403); a page without a
session is redirected to ``/login?next=<path>``.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi.responses import RedirectResponse, Response

from frontdesk.agents.programs.web.auth import COOKIE, Sessions, same
from frontdesk.agents.programs.web.errors import is_api
from frontdesk.agents.programs.web.loopback import is_loopback

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
OPEN_PATHS = ("/login", "/logout", "/call", "/call/token", "/call/access")  # exactly
OPEN_PREFIXES = ("/static/",)
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}

Scope = MutableMapping[str, Any]


def headers_of(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def host_name(header: str) -> str:
    """The name in a Host header, without its port ("[::1]:8080" -> "::1")."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def cookie(headers: dict[str, str], name: str) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel else None


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an Origin or Referer value; None if it has none."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or port is None:
        return None
    return parts.scheme.lower(), parts.hostname.lower(), port


def own_origin(scope: Scope, headers: dict[str, str]) -> tuple[str, str, int] | None:
    """This console as the browser addressed it: the scheme (behind a proxy on loopback,
    uvicorn takes it from X-Forwarded-Proto) and the Host header."""
    host = headers.get("host")
    if not host:
        return None
    return _origin(f"{scope.get('scheme', 'http')}://{host}")


def origin_problem(scope: Scope, headers: dict[str, str], bearer: bool) -> str | None:
    """Why a state-changing request is refused as cross-site, or None."""
    if scope.get("method", "GET") in SAFE_METHODS:
        return None
    claimed = headers.get("origin") or headers.get("referer")
    if claimed is None:
        if bearer:
            return None  # no browser sends our bearer token from another site
        return "forbidden: a state-changing request must carry Origin or Referer"
    if claimed == "null" or _origin(claimed) is None:
        return "forbidden: a cross-site request (opaque origin)"
    if _origin(claimed) != own_origin(scope, headers):
        return "forbidden: a cross-site request"
    return None


class Guard:
    def __init__(self, app: Any, token: str | None, sessions: Sessions | None) -> None:
        self.app = app
        self.token = token
        self.sessions = sessions

    def _bearer(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        return (
            self.token is not None
            and auth[:7].lower() == "bearer "
            and same(auth[7:].strip(), self.token)
        )

    def check(self, scope: Scope) -> tuple[int, str] | None:
        """(status, why) when the request may not proceed, else None."""
        headers = headers_of(scope)
        path: str = scope.get("path", "")
        if self.token is None:
            client = scope.get("client")
            if client is not None and not is_loopback(client[0]):
                return 403, "forbidden: this console has no token, so it answers this machine only"
            host = host_name(headers.get("host", ""))
            if host and not is_loopback(host):
                return (
                    403,
                    "forbidden: this console has no token, so it answers loopback names only",
                )
        bearer = self._bearer(headers)
        problem = origin_problem(scope, headers, bearer)
        if problem is not None:
            return 403, problem
        if self.token is None or bearer or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return None
        assert self.sessions is not None
        if self.sessions.valid(cookie(headers, COOKIE)):
            return None
        return 401, "unauthorized: send Authorization: Bearer <token>, or log in"

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.check(scope)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, why = refused
        path: str = scope.get("path", "")
        if status == 401 and not is_api(path) and scope.get("method") in ("GET", "HEAD"):
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            response: Response = RedirectResponse(
                f"/login?next={quote(target, safe='')}", status_code=303
            )
        else:
            response = Response(
                json.dumps({"message": why}), status_code=status, media_type="application/json"
            )
            if status == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="frontdesk"'
        await response(scope, receive, send)
