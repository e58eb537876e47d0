"""The console over time: the calls page is live (a ``change`` event whenever the store may have
changed, calls included), a database that goes away is 503 with Retry-After and logged as an
outage (down, back), not a traceback per request, and ``frontdesk web`` stops within 2 s with
event streams open."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time

import httpx
import pytest
from netcut import Cut
from sqlalchemy.engine import make_url
from webclient import console, served

from frontdesk.db.outage import OUTAGE

FRONTDESK = [sys.executable, "-m", "frontdesk.agents.programs"]


async def _next_event(lines, name: str, timeout: float = 15.0) -> None:
    async def find() -> None:
        async for line in lines:
            if line == f"event: {name}":
                return
        raise EOFError("the stream ended")

    await asyncio.wait_for(find(), timeout)


@pytest.mark.backends("sqlite", "postgres")
async def test_a_call_starting_or_ending_is_announced_to_the_calls_page(db_url, store):
    async with served(db_url, store=store) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            async with c.stream("GET", "/api/events", params={"changes": 1}) as stream:
                lines = stream.aiter_lines()
                assert (await lines.__anext__()).startswith("retry:")
                await store.call_started("room-9", "ann")
                await _next_event(lines, "change")
                rows = (await c.get("/calls/rows")).text
                assert 'data-session="room-9" data-ended="no"' in rows
                await store.call_ended("room-9")
                await _next_event(lines, "change")
                assert 'data-ended="yes"' in (await c.get("/calls/rows")).text
            page = (await c.get("/calls")).text
            assert 'sse-connect="/api/events?changes=1"' in page and "sse:change" in page
            assert "<ol" not in page.split('data-session="room-9"')[1].split("</tr>")[0]
            assert "no handoffs" in page  # not "1. no handoffs"


@pytest.mark.backends("postgres")
async def test_a_database_outage_is_503_with_retry_after_and_logged_once(db_url, caplog):
    u = make_url(db_url)
    OUTAGE.reset()  # an earlier test's outage is over
    async with Cut(u.host or "127.0.0.1", u.port or 5432) as cut:
        via = u.set(port=cut.port).render_as_string(hide_password=False)
        async with console(via) as (app, c):
            job = await app.state.store.create(caller="a", tool="t", pattern="background")
            assert (await c.get("/api/tasks")).status_code == 200
            await cut.down()
            with caplog.at_level(logging.INFO):
                for _ in range(3):
                    for method, path in (
                        ("GET", "/api/tasks"),
                        ("GET", f"/api/tasks/{job.id}"),
                        ("GET", "/api/stats"),
                        ("POST", f"/api/tasks/{job.id}/cancel"),
                        ("GET", "/tasks"),
                        ("GET", "/calls"),
                    ):
                        r = await c.request(method, path)
                        assert r.status_code == 503, (method, path, r.status_code, r.text)
                        assert r.headers["retry-after"] == "5"
                await cut.up()
                deadline = time.monotonic() + 30
                while (await c.get("/api/tasks")).status_code != 200:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
                while not any("answering again" in r.getMessage() for r in caplog.records):
                    assert time.monotonic() < deadline, "the console never said it was back"
                    await asyncio.sleep(0.1)
            assert (await c.get(f"/api/tasks/{job.id}")).json()["status"] == "queued"
    # The process's one outage log (db/outage.py): one line down, one back, no traceback.
    web = [r for r in caplog.records if r.name.startswith("frontdesk")]
    assert not [r for r in web if r.exc_info], "a traceback was logged"
    assert len([r for r in web if "not answering (" in r.getMessage()]) == 1
    assert len([r for r in web if "answering again" in r.getMessage()]) == 1
    assert all("\n" not in r.getMessage() for r in web)


async def _frontdesk_web(db_url: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        *FRONTDESK, "web", "--port", "0", "--db", db_url,
        env={**os.environ, "FRONTDESK_WEB_TOKEN": "", "FRONTDESK_WEB_CALL": ""},
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
    assert line.startswith("frontdesk web on http://"), line
    return proc, line.split()[3]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_frontdesk_web_stops_within_2_s_with_streams_open(db_url, sig):
    proc, base = await _frontdesk_web(db_url)
    streams = []
    try:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            for params in ({}, {"changes": 1}, {"task_id": 1}):
                stream = await c.send(c.build_request("GET", "/api/events", params=params),
                                      stream=True)  # fmt: skip
                assert stream.status_code == 200
                assert (await stream.aiter_lines().__anext__()).startswith("retry:")
                streams.append(stream)
            sent = time.monotonic()
            proc.send_signal(sig)
            await asyncio.wait_for(proc.wait(), 30)
            took = time.monotonic() - sent
            for stream in streams:
                await stream.aclose()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode in (0, -sig), proc.returncode
    assert took <= 2.0, f"took {took:.2f} s to stop"
    rest = (await proc.stderr.read()).decode() if proc.stderr else ""
    assert "Traceback" not in rest, rest
