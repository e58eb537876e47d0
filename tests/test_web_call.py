"""The caller page stands apart from the operator console: its own access setting, a room and
an identity the server picks, a microphone-only grant that expires soon, and a rate limit. The
tokens are checked with livekit-api's own TokenVerifier."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import jwt
import pytest
from livekit import api
from webclient import ORIGIN, console

from frontdesk.agents.identity import PARTICIPANT_KIND_SIP, WEB_CALLER_PREFIX, caller_identity
from frontdesk.agents.programs.web.call import CALLER_COOKIE, TOKEN_TTL, CallAccess

LIVEKIT = {
    "LIVEKIT_URL": "wss://lk.test",
    "LIVEKIT_API_KEY": "APIkey1",
    "LIVEKIT_API_SECRET": "s" * 32,
}
OPERATOR = "operator-token-0123456789"
CALLERS = "caller-page-token-0123456789"


@pytest.fixture(autouse=True)
def livekit(monkeypatch):
    for name, value in LIVEKIT.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("LIVEKIT_AGENT_NAME", raising=False)


def verify(jwt: str) -> api.Claims:
    return api.TokenVerifier(LIVEKIT["LIVEKIT_API_KEY"], LIVEKIT["LIVEKIT_API_SECRET"]).verify(jwt)


async def test_off_by_default_and_never_opened_by_the_operator_token(db_url):
    async with console(db_url) as (_, c):
        assert (await c.get("/call")).status_code == 404
        assert (await c.post("/call/token")).status_code == 404
        assert 'href="/call"' not in (await c.get("/tasks")).text
    bearer = {"Authorization": f"Bearer {OPERATOR}"}
    async with console(db_url, token=OPERATOR, call_access=CallAccess("token", CALLERS)) as (
        _,
        c,
    ):
        assert (await c.post("/call/token", headers=bearer)).status_code == 401
        assert (await c.get("/call", headers=bearer)).status_code == 401  # the access form


async def test_the_server_picks_room_and_identity_and_grants_the_microphone_only(
    db_url, monkeypatch
):
    monkeypatch.setenv("LIVEKIT_AGENT_NAME", "frontdesk")
    async with console(db_url, call_access=CallAccess("open")) as (_, c):
        page = await c.get("/call")
        assert page.status_code == 200 and 'name="identity"' not in page.text
        assert "wss://lk.test" in page.headers["content-security-policy"]
        # Whatever the browser claims is ignored: there is nothing it may ask for.
        claimed = {"identity": "+15551234567", "room": "someone-elses-room"}
        first = await c.post("/call/token", json=claimed)
        assert first.status_code == 200, first.text
        body = first.json()
        assert body["identity"].startswith(WEB_CALLER_PREFIX) and body["room"] != claimed["room"]
        assert body["room"].startswith("frontdesk-web-") and body["url"] == "wss://lk.test"
        assert "+1555" not in body["identity"]
        claims = verify(body["token"])
        assert claims.identity == body["identity"]
        grant = claims.video
        assert grant.room_join and grant.room == body["room"]
        assert grant.can_publish_sources == ["microphone"]
        assert grant.can_subscribe and grant.can_publish_data
        assert not grant.can_update_own_metadata
        assert not (grant.room_admin or grant.room_create or grant.room_list or grant.room_record)
        assert claims.room_config.agents[0].agent_name == "frontdesk"
        assert body["expires_in"] == TOKEN_TTL.total_seconds() <= 300
        with pytest.raises(jwt.InvalidSignatureError):
            api.TokenVerifier(LIVEKIT["LIVEKIT_API_KEY"], "another secret" * 3).verify(
                body["token"]
            )

        # The same browser is the same caller next time (its follow-ups find it), in a new room.
        again = (await c.post("/call/token")).json()
        assert again["identity"] == body["identity"] and again["room"] != body["room"]
        # A forged identity cookie is not believed: a fresh identity instead.
        c.cookies.set(CALLER_COOKIE, f"{WEB_CALLER_PREFIX}victim.9999999999.forged", path="/call")
        forged = (await c.post("/call/token")).json()
        assert forged["identity"] not in (body["identity"], f"{WEB_CALLER_PREFIX}victim")
    async with console(db_url, call_access=CallAccess("open")) as (_, other):
        assert (await other.post("/call/token")).json()["identity"] != body["identity"]


def test_a_web_identity_is_never_a_phone_callers_key():
    """caller_identity files a web caller under its own ``web-`` key, a shape no SIP key has."""
    web = SimpleNamespace(identity=f"{WEB_CALLER_PREFIX}0123456789abcdef", kind=0, attributes={})
    assert caller_identity(web) == web.identity
    sip = SimpleNamespace(
        identity="sip_1", kind=PARTICIPANT_KIND_SIP, sid="PA_1", attributes={
            "sip.phoneNumber": f"{WEB_CALLER_PREFIX}15551234567"})  # fmt: skip
    assert not caller_identity(sip).startswith(WEB_CALLER_PREFIX)


async def test_its_own_token_opens_it(db_url):
    access = CallAccess("token", CALLERS)
    async with console(db_url, token=OPERATOR, call_access=access) as (_, c):
        form = await c.get("/call")
        assert form.status_code == 401 and 'action="/call/access"' in form.text
        assert (await c.post("/call/token")).status_code == 401
        wrong = await c.get("/call", params={"access": "guess"})
        assert wrong.status_code == 401 and "not right" in wrong.text
        link = await c.get("/call", params={"access": CALLERS})
        assert link.status_code == 303 and link.headers["location"] == "/call"  # out of the URL
        assert (
            "Path=/call" in link.headers["set-cookie"] and CALLERS not in link.headers["set-cookie"]
        )
        assert (await c.get("/call")).status_code == 200
        assert (await c.post("/call/token")).status_code == 200
        # The caller's access opens nothing of the console's.
        assert (await c.get("/api/tasks")).status_code == 401
        c.cookies.clear()
        typed = await c.post("/call/access", data={"access": CALLERS})
        assert typed.status_code == 303 and (await c.post("/call/token")).status_code == 200


async def test_minting_is_rate_limited_per_address_and_overall(db_url):
    async with console(db_url, call_access=CallAccess("open")) as (app, c):
        answers = [(await c.post("/call/token")).status_code for _ in range(7)]
        assert answers == [200] * 6 + [429]
        limited = await c.post("/call/token")
        assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
        assert limited.json()["message"] == "too many requests"
    # Another address has its own allowance (a console with a token serves any address).
    async with console(
        db_url,
        token=OPERATOR,
        call_access=CallAccess("open"),
        client={"client": ("203.0.113.9", 1)},
    ) as (app, far):
        app.state.call_limit.per_key = 2
        assert [(await far.post("/call/token")).status_code for _ in range(3)] == [200, 200, 429]
        transport = httpx.ASGITransport(app=app, client=("203.0.113.10", 1))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=ORIGIN
        ) as near:
            assert (await near.post("/call/token")).status_code == 200
            app.state.call_limit.total = 3  # the overall ceiling holds whoever asks
            assert (await near.post("/call/token")).status_code == 429
