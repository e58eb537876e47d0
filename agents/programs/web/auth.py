"""Who may use the console.

With a token (``FRONTDESK_WEB_TOKEN``), every request, pages, API and SSE alike, carries it:
``Authorization: Bearer <token>``, or the HttpOnly cookie that ``POST /login`` sets (form
fields ``token`` and ``next``; the form itself is the pages' ``GET /login``). The cookie holds
an HMAC of the token, never the token, and every comparison is constant-time. A cookie-borne
POST must come from this site (SameSite=Lax, and an Origin, when sent, must match Host).

Without a token the console is for this machine only: the command binds loopback (command.py),
and the app answers only loopback clients under a loopback Host name, so a web page elsewhere
cannot reach it through DNS rebinding.

Refused: API paths get 401 JSON with ``WWW-Authenticate: Bearer``; a page is redirected to
``/login?next=<path>``. ``/login`` and ``/static/`` (public npm assets) need nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from frontdesk.agents.programs.web.loopback import is_loopback

COOKIE = "frontdesk_session"
OPEN_PATHS = ("/login",)  # exactly
OPEN_PREFIXES = ("/static/",)
API_PREFIXES = ("/api/", "/openapi.json")
MAX_FORM_BYTES = 8192

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Any]

router = APIRouter(include_in_schema=False)


def session_value(token: str) -> str:
    """What the login cookie holds: derived from the token, and useless without it."""
    return hmac.new(token.encode(), b"frontdesk-web-session", hashlib.sha256).hexdigest()


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def safe_next(target: str | None) -> str:
    """Only a path on this site may follow a login, never another host."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/tasks"
    return target


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _host_name(header: str) -> str:
    """The name in a Host header, without its port ("[::1]:8080" -> "::1")."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _cookie(headers: dict[str, str]) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else None


def check(scope: Scope, token: str | None) -> str | None:
    """None when the request may proceed, else why not (for the 401/403 message)."""
    headers = _headers(scope)
    if token is None:
        client = scope.get("client")
        host = _host_name(headers.get("host", ""))
        if client is not None and not is_loopback(client[0]):
            return "forbidden: this console has no token, so it answers this machine only"
        if host and not is_loopback(host):
            return "forbidden: this console has no token, so it answers loopback host names only"
        return None
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and same(auth[7:].strip(), token):
        return None
    cookie = _cookie(headers)
    if cookie is not None and same(cookie, session_value(token)):
        origin = headers.get("origin")
        if scope.get("method") not in ("GET", "HEAD", "OPTIONS") and origin is not None:
            if urlsplit(origin).netloc != headers.get("host"):
                return "forbidden: a cross-site request"
        return None
    return "unauthorized: send Authorization: Bearer <token>, or log in"


class TokenGuard:
    """ASGI middleware (not Starlette's BaseHTTPMiddleware, which would buffer the SSE stream)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if self.token is not None and (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)):
            await self.app(scope, receive, send)
            return
        problem = check(scope, self.token)
        if problem is None:
            await self.app(scope, receive, send)
            return
        if problem.startswith("forbidden"):
            response: Response = _json(403, problem)
        elif path.startswith(API_PREFIXES) or path == "/openapi.json":
            response = _json(401, problem)
            response.headers["WWW-Authenticate"] = 'Bearer realm="frontdesk"'
        else:
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            response = RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
        await response(scope, receive, send)


def _json(status: int, message: str) -> Response:
    return Response(
        json.dumps({"message": message}), status_code=status, media_type="application/json"
    )


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the form's ``token``; on success set the session cookie and go to ``next``."""
    token: str | None = request.app.state.token
    body = await request.body()
    form = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"), keep_blank_values=True)
    target = safe_next((form.get("next") or [""])[0])
    if token is None:
        return RedirectResponse(target, status_code=303)  # nothing to log in to
    given = (form.get("token") or [""])[0].strip()
    if not given or not same(given, token):
        return RedirectResponse(f"/login?failed=1&next={quote(target, safe='')}", status_code=303)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        session_value(token),
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
