"""The operator's token and sessions.

With a token (``FRONTDESK_WEB_TOKEN``, at least ``MIN_TOKEN`` characters), scripts send
``Authorization: Bearer <token>`` and browsers log in: ``POST /login`` (form fields ``token``
and ``next``) checks the token and sets an HttpOnly, SameSite=Lax cookie holding a new
random session id with its expiry, signed with a key derived from the token (signing.py). Every
login is its own session; a session ends after ``SESSION_SECONDS``, or at ``POST /logout``,
which revokes it on the server (a copied cookie stops working too), or when the token changes.
Comparisons are constant-time. Login attempts are rate-limited per client address.

Who needs a session at all is guard.py's business.
"""

from __future__ import annotations

import hmac
import secrets
import time
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from frontdesk.agents.programs.web.errors import TooMany
from frontdesk.agents.programs.web.signing import derive, sign, unsign

COOKIE = "frontdesk_session"
MIN_TOKEN = 16
SESSION_SECONDS = 8 * 3600

router = APIRouter(include_in_schema=False)


def token_problem(token: str | None) -> str | None:
    """Why a token cannot guard the console, or None."""
    if token is not None and len(token) < MIN_TOKEN:
        return (
            f"FRONTDESK_WEB_TOKEN is {len(token)} characters; use at least {MIN_TOKEN} "
            "(e.g. openssl rand -hex 24)"
        )
    return None


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class Sessions:
    """Signed session cookies for one token, and the ids revoked before their expiry."""

    def __init__(self, token: str, ttl: float = SESSION_SECONDS) -> None:
        self.key = derive(token, "session")
        self.ttl = ttl
        self.revoked: dict[str, float] = {}  # session id -> when its cookie expires anyway

    def new(self) -> str:
        return sign(self.key, secrets.token_urlsafe(18), self.ttl)

    def valid(self, cookie: str | None) -> bool:
        sid = unsign(self.key, cookie)
        return sid is not None and sid not in self.revoked

    def revoke(self, cookie: str | None) -> None:
        sid = unsign(self.key, cookie)
        if sid is None:
            return
        now = time.time()
        self.revoked = {s: t for s, t in self.revoked.items() if t > now}
        self.revoked[sid] = now + self.ttl


def safe_next(target: str | None) -> str:
    """Only a path on this site may follow a login, never another host."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/tasks"
    return target


def _client(request: Request) -> str:
    return request.client.host if request.client else "?"


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the form's ``token``; on success set a new session cookie and go to ``next``."""
    token: str | None = request.app.state.token
    body = await request.body()  # bounded by the body limit (limits.py)
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    target = safe_next((form.get("next") or [""])[0])
    if token is None:
        return RedirectResponse(target, status_code=303)  # nothing to log in to
    wait = request.app.state.login_limit.take(_client(request))
    if wait is not None:
        raise TooMany(wait)
    given = (form.get("token") or [""])[0].strip()
    if not given or not same(given, token):
        return RedirectResponse(f"/login?failed=1&next={quote(target, safe='')}", status_code=303)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        request.app.state.sessions.new(),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End this browser's session, here and on the server."""
    sessions: Sessions | None = request.app.state.sessions
    if sessions is not None:
        sessions.revoke(request.cookies.get(COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
