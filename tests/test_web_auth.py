"""Who may use the console: the token (header or a login session), loopback without one,
sessions that are per login, expire and end at logout, and the command's refusals (one line,
exit 2)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import httpx
from webclient import console

from frontdesk.agents.programs.web.auth import COOKIE, SESSION_SECONDS, Sessions
from frontdesk.agents.programs.web.call import call_access
from frontdesk.agents.programs.web.signing import derive, sign

TOKEN = "s3cret-token-for-tests"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
FRONTDESK = [sys.executable, "-m", "frontdesk.agents.programs"]


async def test_token_guards_api_pages_openapi_and_events(db_url):
    async with console(db_url, token=TOKEN) as (_, c):
        for path in ("/api/tasks", "/openapi.json", "/api/events", "/api/stats"):
            r = await c.get(path)
            assert r.status_code == 401, path
            assert r.json()["message"].startswith("unauthorized")
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert (await c.get("/api/docs")).headers["location"] == "/login?next=%2Fapi%2Fdocs"
        assert (await c.post("/api/tasks/1/cancel")).status_code == 401
        assert (
            await c.get("/api/tasks", headers={"Authorization": "Bearer nope"})
        ).status_code == 401
        assert (await c.get("/api/tasks", headers={"Authorization": TOKEN})).status_code == 401
        page = await c.get("/tasks?status=failed")
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Ftasks%3Fstatus%3Dfailed"
        assert (await c.get("/api/tasks", headers=BEARER)).status_code == 200
        assert (await c.get("/api/tasks/77", headers=BEARER)).status_code == 404


async def _login(c) -> str:
    ok = await c.post("/login", data={"token": TOKEN, "next": "//evil.example/x"})
    assert ok.status_code == 303 and ok.headers["location"] == "/tasks"
    header = ok.headers["set-cookie"]
    assert "HttpOnly" in header and "samesite=lax" in header.lower()
    assert f"Max-Age={SESSION_SECONDS}" in header and TOKEN not in header
    c.cookies.clear()
    return ok.cookies[COOKIE]


async def test_each_login_is_its_own_session_that_logout_ends(db_url):
    async with console(db_url, token=TOKEN) as (_, c):
        wrong = await c.post("/login", data={"token": "guess", "next": "/calls"})
        assert wrong.status_code == 303
        assert wrong.headers["location"] == "/login?failed=1&next=%2Fcalls"
        assert COOKIE not in wrong.cookies

        first, second = await _login(c), await _login(c)
        assert first != second  # a random session id each, not a value derived from the token
        for cookie in (first, second):
            c.cookies.set(COOKIE, cookie)
            assert (await c.get("/api/tasks")).status_code == 200
            c.cookies.clear()

        # Logging out ends that session on the server: the copied cookie stops working too.
        c.cookies.set(COOKIE, first)
        out = await c.post("/logout")
        assert out.status_code == 303 and COOKIE in out.headers["set-cookie"]
        c.cookies.clear()
        c.cookies.set(COOKIE, first)
        assert (await c.get("/api/tasks")).status_code == 401
        c.cookies.set(COOKIE, second)
        assert (await c.get("/api/tasks")).status_code == 200  # another login is untouched

        # An expired session, a forged one, and one signed for another token: refused.
        key = derive(TOKEN, "session")
        for cookie in (
            sign(key, "old-session", -1),
            "forged",
            first[:-3] + "abc",
            Sessions("another-token-of-enough-length").new(),
        ):
            c.cookies.set(COOKIE, cookie)
            assert (await c.get("/api/tasks")).status_code == 401, cookie
        c.cookies.set(COOKIE, sign(key, "still-good", 60))
        assert (await c.get("/api/tasks")).status_code == 200


async def test_pages_offer_a_logout_button_with_a_token_only(db_url):
    async with console(db_url, token=TOKEN) as (_, c):
        c.cookies.set(COOKIE, await _login(c))
        page = (await c.get("/tasks")).text
        assert '<form class="logout" method="post" action="/logout">' in page
    async with console(db_url) as (_, c):
        assert 'action="/logout"' not in (await c.get("/tasks")).text


async def test_without_a_token_only_loopback_is_served(db_url):
    async with console(db_url) as (_, c):
        assert (await c.get("/api/tasks")).status_code == 200
        rebound = await c.get("/api/tasks", headers={"Host": "attacker.example:8080"})
        assert rebound.status_code == 403 and "loopback" in rebound.json()["message"]
        assert (await c.get("/api/tasks", headers={"Host": "localhost:8080"})).status_code == 200
        assert (await c.get("/api/tasks", headers={"Host": "[::1]:8080"})).status_code == 200
    async with console(db_url, client={"client": ("203.0.113.9", 4000)}) as (_, c):
        far = await c.get("/api/tasks")
        assert far.status_code == 403 and "this machine only" in far.json()["message"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*FRONTDESK, "web", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FRONTDESK_WEB_TOKEN": "", "FRONTDESK_WEB_CALL": "", **(env or {})},
    )


def test_web_refuses_a_short_token_and_a_bad_caller_page_setting(db_url):
    short = _run("--port", "0", "--db", db_url, env={"FRONTDESK_WEB_TOKEN": "x" * 15})
    assert short.returncode == 2 and short.stdout == ""
    assert short.stderr.strip().splitlines() == [
        "error: FRONTDESK_WEB_TOKEN is 15 characters; use at least 16 (e.g. openssl rand -hex 24)"
    ]
    bad = _run("--port", "0", "--db", db_url, env={"FRONTDESK_WEB_CALL": "token"})
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "needs FRONTDESK_WEB_CALL_TOKEN" in bad.stderr
    for env, says in (
        ({"FRONTDESK_WEB_CALL": "sometimes"}, "FRONTDESK_WEB_CALL is 'sometimes'"),
        ({"FRONTDESK_WEB_CALL": "token", "FRONTDESK_WEB_CALL_TOKEN": "short"}, "at least 16"),
        ({"FRONTDESK_WEB_CALL": "Open"}, None),
    ):
        problem = call_access(env).problem()
        assert (problem is None) if says is None else (says in problem), (env, problem)


def test_web_refuses_a_public_host_without_a_token(db_url):
    done = _run("--host", "0.0.0.0", "--db", db_url)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: --host 0.0.0.0 is not loopback: set FRONTDESK_WEB_TOKEN to serve beyond this machine"
    ]


def test_web_refuses_a_taken_port_and_a_bad_database(db_url):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run("--port", str(port), "--db", db_url)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}")
    bad = _run("--port", "0", "--db", "mysql://nowhere/x")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "unsupported database" in bad.stderr


async def test_web_serves_with_a_token_on_any_host(db_url):
    proc = await asyncio.create_subprocess_exec(
        *FRONTDESK,
        "web",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--db",
        db_url,
        env={**os.environ, "FRONTDESK_WEB_TOKEN": TOKEN},
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line.startswith("frontdesk web on http://127.0.0.1:") and "token required" in line
        base = line.split()[3]
        async with httpx.AsyncClient(base_url=base) as c:
            assert (await c.get("/api/tasks")).status_code == 401
            r = await c.get("/api/tasks", headers=BEARER)
            assert r.status_code == 200 and r.json() == {"tasks": [], "next_before": None}
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode in (0, -15)
