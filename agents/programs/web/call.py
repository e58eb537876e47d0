"""The caller page (``/call``) and the token endpoint that lets it join a LiveKit room.

It stands apart from the operator console: the operator token neither opens it nor is needed
for it. Who may use it is its own setting (``CallAccess``, from ``FRONTDESK_WEB_CALL``):
``off`` (the default: 404, as an unknown path), ``open`` (anyone who can reach the console), or
``token``: callers need ``FRONTDESK_WEB_CALL_TOKEN``, given once as ``/call?access=<token>`` (a
link to hand out) or typed into the page's access form; either sets a signed, expiring cookie.

What the browser may ask for is nothing: ``POST /call/token`` takes no body. The server picks
the room (a new ``frontdesk-web-<random>`` per call) and the identity: ``web-<random>``
(agents/identity.py), kept in a cookie signed with a key derived from the LiveKit API secret,
so the same browser is the same caller next time (its follow-ups find it) and no browser can be
anyone else, a phone number least of all. The grant lets it join that room only, publish its
microphone only (and data, for the task RPC), and subscribe; it lasts ``TOKEN_TTL``, enough to
join (LiveKit refreshes a connected participant's token itself). Minting is rate-limited per
client address and overall.

The page joins with livekit-client, shows the transcript (the agent's ``lk.transcription``
text streams) and the caller's task cards from the ``frontdesk.task`` RPC (payloads in
docs/deploy.md). LiveKit settings are read per request, so a console started before they were
exported needs no restart; without LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET the
token endpoint answers 404 and the page says what is missing.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel

from frontdesk.agents.identity import WEB_CALLER_PREFIX
from frontdesk.agents.programs.web.auth import MIN_TOKEN, same
from frontdesk.agents.programs.web.errors import TooMany
from frontdesk.agents.programs.web.guard import cookie, headers_of
from frontdesk.agents.programs.web.ratelimit import RateLimit
from frontdesk.agents.programs.web.signing import derive, sign, unsign
from frontdesk.agents.programs.web.templating import render

router = APIRouter()
_PAGE = {"content": {"text/html": {"schema": {"type": "string"}}}}
_JSON = {"content": {"application/json": {"schema": {"type": "object"}}}}
_RETRY = {"Retry-After": {"schema": {"type": "integer"}}}

TOKEN_TTL = timedelta(minutes=5)
ACCESS_COOKIE = "frontdesk_call"
ACCESS_SECONDS = 12 * 3600
CALLER_COOKIE = "frontdesk_caller"
CALLER_SECONDS = 30 * 86400
_VARS = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")

Mode = Literal["off", "open", "token"]
AccessParam = Annotated[
    str | None, Query(alias="access", max_length=200, description="the caller-page token")
]


@dataclass(frozen=True)
class CallAccess:
    """Who may use the caller page."""

    mode: Mode = "off"
    token: str | None = None

    def problem(self) -> str | None:
        """Why this setting cannot work (the command's one-line refusal), or None."""
        if self.mode not in ("off", "open", "token"):
            return f"FRONTDESK_WEB_CALL is {self.mode!r}; use off, open or token"
        if self.mode == "token" and (self.token is None or len(self.token) < MIN_TOKEN):
            return (
                f"FRONTDESK_WEB_CALL=token needs FRONTDESK_WEB_CALL_TOKEN of at least "
                f"{MIN_TOKEN} characters"
            )
        return None

    def key(self) -> bytes:
        assert self.token is not None
        return derive(self.token, "call-access")


def call_access(environ: Mapping[str, str] | None = None) -> CallAccess:
    env = os.environ if environ is None else environ
    mode = env.get("FRONTDESK_WEB_CALL", "").strip().lower() or "off"
    token = env.get("FRONTDESK_WEB_CALL_TOKEN", "").strip() or None
    return CallAccess(mode, token)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LiveKitKeys:
    url: str
    api_key: str
    api_secret: str
    agent_name: str = ""  # the worker's --agent-name (explicit dispatch), if any


def livekit_keys(environ: Mapping[str, str] | None = None) -> LiveKitKeys | None:
    """The LiveKit project the console mints tokens for, or None when any key is missing."""
    env = os.environ if environ is None else environ
    url, key, secret = (env.get(n, "").strip() for n in _VARS)
    if not (url and key and secret):
        return None
    return LiveKitKeys(url, key, secret, env.get("LIVEKIT_AGENT_NAME", "").strip())


class TokenAnswer(BaseModel):
    url: str
    token: str
    room: str
    identity: str
    expires_in: int


def mint_token(keys: LiveKitKeys, identity: str, room: str) -> str:
    """A JWT that lets ``identity`` join ``room``, publish its microphone and data (RPC), and
    subscribe to the agent; with an agent name, joining dispatches that agent."""
    from livekit import api

    token = (
        api.AccessToken(keys.api_key, keys.api_secret)
        .with_identity(identity)
        .with_ttl(TOKEN_TTL)
        .with_grants(
            api.VideoGrants(
                room_join=True,
                room=room,
                can_publish=True,
                can_publish_sources=["microphone"],
                can_subscribe=True,
                can_publish_data=True,
                can_update_own_metadata=False,
            )
        )
    )
    if keys.agent_name:
        token = token.with_room_config(
            api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name=keys.agent_name)])
        )
    return token.to_jwt()


def _access(request: Request) -> CallAccess:
    access: CallAccess = request.app.state.call_access
    if access.mode == "off":
        raise HTTPException(404, "Not Found")
    return access


def _admitted(request: Request, access: CallAccess) -> bool:
    if access.mode == "open":
        return True
    value = cookie(headers_of(request.scope), ACCESS_COOKIE)
    return unsign(access.key(), value) == "caller"


def _let_in(response: Response, request: Request, access: CallAccess) -> None:
    response.set_cookie(
        ACCESS_COOKIE,
        sign(access.key(), "caller", ACCESS_SECONDS),
        max_age=ACCESS_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/call",
    )


def _client(request: Request) -> str:
    return request.client.host if request.client else "?"


def _limited(request: Request, limit: RateLimit) -> None:
    wait = limit.take(_client(request))
    if wait is not None:
        raise TooMany(wait)


async def call_page(request: Request, access_token: AccessParam = None) -> Response:
    """The caller page (only when FRONTDESK_WEB_CALL is open or token)."""
    access = _access(request)
    given = access_token
    if access.mode == "token" and given is not None:
        _limited(request, request.app.state.call_limit)
        if access.token is not None and same(given, access.token):
            done = RedirectResponse("/call", status_code=303)  # the token leaves the URL
            _let_in(done, request, access)
            return done
    if not _admitted(request, access):
        context = {"failed": given is not None or "failed" in request.query_params}
        return render(request, "call_access.html", context, 401)
    return render(request, "call.html", {"configured": livekit_keys() is not None})


router.add_api_route(
    "/call",
    call_page,
    methods=["GET"],
    response_class=HTMLResponse,
    tags=["pages"],
    responses={
        200: {"description": "the caller page", **_PAGE},
        303: {"description": "access granted by ?access=; the token leaves the URL"},
        401: {"description": "the access form (FRONTDESK_WEB_CALL=token)", **_PAGE},
        404: {"description": "the caller page is off", **_PAGE},
        429: {"description": "too many access attempts", "headers": _RETRY, **_PAGE},
    },
)
router.add_api_route("/call", call_page, methods=["HEAD"], include_in_schema=False)


@router.post("/call/access", include_in_schema=False)
async def call_access_form(request: Request) -> Response:
    """The access form: the caller-page token typed in, once."""
    access = _access(request)
    _limited(request, request.app.state.call_limit)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    given = (form.get("access") or [""])[0].strip()
    if access.mode == "token" and access.token is not None and given and same(given, access.token):
        done = RedirectResponse("/call", status_code=303)
        _let_in(done, request, access)
        return done
    return RedirectResponse("/call?failed=1", status_code=303)


@router.post(
    "/call/token",
    response_model=TokenAnswer,
    tags=["caller page"],
    responses={
        401: {"description": "FRONTDESK_WEB_CALL=token and no access cookie", **_JSON},
        404: {"description": "the caller page is off, or LIVEKIT_* are not set", **_JSON},
        429: {
            "description": "too many tokens minted from this address, or overall",
            "headers": _RETRY,
            **_JSON,
        },
    },
    summary="A LiveKit token for the caller page: room and identity picked by the server",
)
async def call_token(request: Request, response: Response) -> dict[str, Any]:
    access = _access(request)
    if not _admitted(request, access):
        raise HTTPException(401, "the caller page needs its access token")
    keys = livekit_keys()
    if keys is None:
        raise HTTPException(404, "Not Found")
    _limited(request, request.app.state.call_limit)
    caller_key = derive(keys.api_secret, "web-caller")
    identity = unsign(caller_key, request.cookies.get(CALLER_COOKIE))
    if identity is None or not identity.startswith(WEB_CALLER_PREFIX):
        identity = WEB_CALLER_PREFIX + secrets.token_hex(8)
    response.set_cookie(  # renewed on each call, so a regular caller keeps one identity
        CALLER_COOKIE,
        sign(caller_key, identity, CALLER_SECONDS),
        max_age=CALLER_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/call",
    )
    room = f"frontdesk-web-{secrets.token_hex(6)}"
    return {
        "url": keys.url,
        "token": mint_token(keys, identity, room),
        "room": room,
        "identity": identity,
        "expires_in": int(TOKEN_TTL.total_seconds()),
    }
