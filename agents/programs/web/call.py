"""The caller page (`/call`) and the token endpoint that lets it join a LiveKit room.

The page joins as the caller with livekit-client, shows the transcript (the agent's
``lk.transcription`` text streams) and the caller's task cards from the ``frontdesk.task`` RPC
(payloads in docs/deploy.md). The endpoint mints a short-lived LiveKit JWT with livekit-api;
it exists only while LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET are set, and answers
404 otherwise, exactly as an unknown path does. The keys are read per request, so a console
started before they were exported does not need a restart, and tests can set them freely.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from frontdesk.agents.programs.web.templating import render

router = APIRouter()

# What a caller may call themselves: the store keys tasks by it, and LiveKit shows it to the
# agent, so keep it printable and short (a name, a phone number, an e-mail-like handle).
IDENTITY_PATTERN = r"^[A-Za-z0-9+][A-Za-z0-9 _.+@:-]{0,63}$"
ROOM_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
TOKEN_TTL = timedelta(minutes=15)  # only joining needs it; a call in progress outlives it


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


_VARS = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


class TokenRequest(BaseModel):
    identity: str = Field(pattern=IDENTITY_PATTERN, description="the caller, as tasks know them")
    room: str | None = Field(None, pattern=ROOM_PATTERN, description="default: a new room")


class TokenAnswer(BaseModel):
    url: str
    token: str
    room: str
    identity: str


def mint_token(keys: LiveKitKeys, identity: str, room: str) -> str:
    """A JWT that lets ``identity`` join ``room``, publish their microphone and data (RPC),
    and subscribe to the agent; with an agent name, joining dispatches that agent."""
    from livekit import api

    token = (
        api.AccessToken(keys.api_key, keys.api_secret)
        .with_identity(identity)
        .with_name(identity)
        .with_ttl(TOKEN_TTL)
        .with_grants(
            api.VideoGrants(
                room_join=True,
                room=room,
                can_publish=True,
                can_subscribe=True,
                can_publish_data=True,
            )
        )
    )
    if keys.agent_name:
        token = token.with_room_config(
            api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name=keys.agent_name)])
        )
    return token.to_jwt()


@router.get("/call", response_class=HTMLResponse, include_in_schema=False)
async def call_page(request: Request) -> HTMLResponse:
    return render(request, "call.html", {"configured": livekit_keys() is not None})


@router.post(
    "/call/token",
    response_model=TokenAnswer,
    responses={404: {"description": "LIVEKIT_* are not set"}},
    summary="A LiveKit token for the caller page (only when LIVEKIT_* are set)",
)
async def call_token(body: TokenRequest) -> dict[str, Any]:
    keys = livekit_keys()
    if keys is None:
        raise HTTPException(404, "Not Found")
    room = body.room or f"frontdesk-{secrets.token_hex(4)}"
    identity = re.sub(r"\s+", " ", body.identity).strip()
    return {
        "url": keys.url,
        "token": mint_token(keys, identity, room),
        "room": room,
        "identity": identity,
    }
