"""Limits and headers, over real HTTP (uvicorn on loopback): a body over the limit is answered
413 before it is read, whether its length is declared or it streams in chunks; every answer
carries the security headers; 405 says which methods are allowed; pages answer HEAD."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx
from webclient import ORIGIN, console, served

from frontdesk.agents.programs.web.limits import MAX_BODY


async def _raw(base: str, head: str, body_parts: list[bytes]) -> tuple[int, bytes]:
    """Send ``head`` then ``body_parts`` on a plain socket, stopping as soon as an answer
    comes; returns (status, what was read)."""
    where = urlsplit(base)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    try:
        writer.write(head.encode())
        await writer.drain()
        answer = asyncio.ensure_future(reader.read(65536))
        for part in body_parts:
            if answer.done():
                break
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0)  # let the answer, if any, arrive between parts
        data = await asyncio.wait_for(answer, 10)
    finally:
        writer.close()
    return int(data.split(b" ", 2)[1]), data


async def test_a_declared_large_body_is_refused_before_it_is_sent(db_url):
    async with served(db_url) as (_, base):
        host = urlsplit(base).netloc
        head = (
            f"POST /login HTTP/1.1\r\nHost: {host}\r\nOrigin: {base}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {50 * 1024 * 1024}\r\n\r\n"
        )
        # Only the headers go out: a server that waited for the 50 MB would never answer.
        status, data = await _raw(base, head, [])
        assert status == 413 and b"over 16384 bytes" in data


async def test_a_chunked_body_is_refused_once_it_passes_the_limit(db_url):
    async with served(db_url) as (_, base):
        host = urlsplit(base).netloc
        head = (
            f"POST /login HTTP/1.1\r\nHost: {host}\r\nOrigin: {base}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 4096
        parts = [f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"] * 64  # 256 KiB, never ended
        status, data = await _raw(base, head, parts)
        assert status == 413 and b"over 16384 bytes" in data
        # Under the limit, the same route answers as ever.
        async with httpx.AsyncClient(base_url=base, headers={"Origin": base}) as c:
            ok = await c.post("/login", content=b"next=%2Fcalls", headers={
                "Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
            assert ok.status_code == 303 and ok.headers["location"] == "/calls"
            at = await c.post("/call/token", content=b"{" + b" " * (MAX_BODY - 2) + b"}")
            assert at.status_code == 404  # the caller page is off: past the limit check


async def test_every_answer_carries_the_security_headers(db_url, store):
    t = await store.create(caller="a", tool="t", pattern="background")
    async with console(db_url, store=store) as (_, c):
        for method, path in (
            ("GET", "/tasks"),
            ("GET", f"/tasks/{t.id}"),
            ("GET", "/api/tasks"),
            ("GET", "/nope"),
            ("GET", "/static/console.css"),
            ("POST", "/api/tasks/999/cancel"),
            ("GET", "/tasks?since=garbage"),
        ):
            r = await c.request(method, path)
            csp = r.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, path
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert r.headers["x-content-type-options"] == "nosniff", path
            assert r.headers["referrer-policy"] == "same-origin", path
            assert r.headers["x-frame-options"] == "DENY", path
        refused = await c.post("/api/tasks/1/cancel", headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403 and refused.headers["x-frame-options"] == "DENY"


async def test_405_says_what_is_allowed_and_pages_answer_head(db_url, store):
    t = await store.create(caller="a", tool="t", pattern="background")
    async with console(db_url, store=store) as (_, c):
        for method, path, allow in (
            ("PUT", "/tasks", "GET, HEAD"),
            ("DELETE", f"/api/tasks/{t.id}", "GET"),
            ("GET", f"/api/tasks/{t.id}/cancel", "POST"),
            ("PUT", "/login", "GET, HEAD, POST"),
        ):
            r = await c.request(method, path, headers=ORIGIN)
            assert r.status_code == 405 and r.headers["allow"] == allow, (method, path)
        for path in ("/tasks", f"/tasks/{t.id}", "/calls", "/stats", "/login", "/api/docs"):
            head = await c.head(path)
            get = await c.get(path)
            assert head.status_code == get.status_code == 200, path
            assert head.headers["content-type"] == get.headers["content-type"]
