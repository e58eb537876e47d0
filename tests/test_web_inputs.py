"""No route answers 5xx on bad input, on SQLite and on Postgres (whose integer columns are 32-bit
and which cannot hold a NUL): the inputs of the audit (issue 22) and a set of hostile values, sent
to every parameter of every page and API route as /openapi.json lists them, and to the event
stream's ids. Pages answer a 400 page with one line; the API a JSON 422."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from webclient import console, served

pytestmark = pytest.mark.backends("sqlite", "postgres")

# Straight from the audit: each of these answered 500 on some page.
AUDIT = [
    "/tasks/2147483648",
    "/tasks/2147483648/panel",
    "/tasks?before=2147483648",
    "/tasks/rows?before=2147483648",
    "/calls/%00",
    "/calls?before=0001-01-01T00:00%2B05:00",
    "/tasks?until=9999-12-31T23:59:59-05:00",
    "/tasks?before=99999999999999999999",
]
HOSTILE = [
    "2147483648",
    "99999999999999999999",
    "-1",
    "0",
    "1.5",
    "\x00",
    "a\x00b",
    "0001-01-01T00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "yesterday",
    "x" * 300,
    "%",
    "_",
    "' OR 1=1 --",
    "\u202egnp.exe",
]


def _one_line_error(page: str) -> str:
    found = re.search(r'<p class="error" role="alert">([^<]+)</p>', page)
    assert found, page[:500]
    assert "\n" not in found[1] and "Traceback" not in page
    return found[1]


async def test_the_audits_inputs_are_a_400_page(db_url, store):
    async with console(db_url, store=store) as (_, c):
        for path in AUDIT:
            r = await c.get(path)
            assert r.status_code in (400, 404), (path, r.status_code)
            assert r.headers["content-type"].startswith("text/html"), path
            _one_line_error(r.text) if r.status_code == 400 else None


async def test_every_parameter_of_every_route_refuses_hostile_values_without_a_5xx(db_url, store):
    t = await store.create(caller="ann", tool="t", pattern="background", session_id="s-1")
    await store.call_started("s-1", "ann")
    async with console(db_url, store=store) as (app, c):
        spec = (await c.get("/openapi.json")).json()
        sent = 0
        for path, item in spec["paths"].items():
            for method, op in item.items():
                if path == "/api/events":
                    continue  # a stream: its ids are checked below
                concrete = path.replace("{task_id}", str(t.id)).replace("{session_id}", "s-1")
                params = [p for p in op.get("parameters", []) if p["in"] in ("query", "path")]
                for param in params:
                    for value in HOSTILE:
                        if param["in"] == "path":
                            url = path.replace("{" + param["name"] + "}", quote(value, safe=""))
                            url = url.replace("{task_id}", str(t.id))
                            query = {}
                        else:
                            url, query = concrete, {param["name"]: value}
                        r = await c.request(method.upper(), url, params=query)
                        sent += 1
                        assert r.status_code < 500, (method, url, query, r.status_code, r.text)
                        if "pages" in op.get("tags", ()) and r.status_code == 400:
                            _one_line_error(r.text)
        assert sent > 300


async def test_event_ids_past_the_column_are_refused_before_the_stream_starts(db_url, store):
    async with served(db_url, store=store) as (_, base):
        import httpx

        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            for headers, params in (
                ({"Last-Event-ID": "9223372036854775806"}, {}),
                ({"Last-Event-ID": "-1"}, {}),
                ({}, {"after": "2147483648"}),
                ({}, {"task_id": "2147483648"}),
            ):
                r = await c.get("/api/events", headers=headers, params=params)
                assert r.status_code == 422, (headers, params)
                assert r.headers["content-type"] == "application/json"
            # The largest id the column holds is a stream that starts and stays up.
            async with c.stream(
                "GET", "/api/events", headers={"Last-Event-ID": str(2**31 - 1)}
            ) as stream:
                assert stream.status_code == 200
                assert (await stream.aiter_lines().__anext__()).startswith("retry:")
