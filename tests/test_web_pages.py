"""The console's server-rendered pages through httpx's ASGI transport, on SQLite and Postgres:
what an operator sees (rows, filters, paging, the timeline, calls, stats), that everything is
escaped and no card number shows, and that bad input answers one line, never a traceback.
The token endpoint of the caller page is checked by decoding the JWT it mints."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from jobkit import start_job
from webclient import ORIGIN

from frontdesk.agents.programs.web.app import create_app
from frontdesk.core import ToolContext, tool
from frontdesk.db.models import utcnow
from frontdesk.db.store import TaskStore

pytestmark = pytest.mark.backends("sqlite", "postgres")

CARD = "4111 1111 1111 1111"


@tool(pattern="critical", sensitive=["cvv"])
async def pay(ctx: ToolContext, card: str, cvv: str, amount: str) -> str:
    """Take a payment (only its redaction is used here)."""
    return "paid"


async def client_for(store: TaskStore, db_url: str, **kw) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(db_url, store=store, **kw)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=ORIGIN
        ) as c:
            yield c


@pytest.fixture
async def client(store, db_url) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(store, db_url):
        yield c


def row_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="task-(\d+)"', page)]


async def seed(store: TaskStore) -> dict[str, int]:
    ids = {}
    ids["report"] = (
        await store.create(
            caller="alice", session_id="call-a", department="reports", tool="build_report",
            pattern="background", args={"period": "march"},
        )
    ).id  # fmt: skip
    ids["search"] = (
        await store.create(
            caller="bob", session_id="call-b", department="search", tool="web_search",
            pattern="interruptible", status="running", args={"q": "late checkout"},
        )
    ).id  # fmt: skip
    await store.transition(ids["search"], "succeeded", result={"hits": 3})
    ids["failed"] = (
        await store.create(
            caller="alice", session_id="call-a", department="reports", tool="build_report",
            pattern="background", status="running",
        )
    ).id  # fmt: skip
    await store.transition(ids["failed"], "failed", error="the chart service timed out")
    return ids


async def test_tasks_page_lists_newest_first_and_filters(store, client):
    ids = await seed(store)
    page = (await client.get("/tasks")).text
    assert row_ids(page) == sorted(ids.values(), reverse=True)
    # The live region re-fetches its own rows on each SSE "task" event.
    assert 'sse-connect="/api/events"' in page and 'hx-trigger="sse:task' in page

    async def ids_for(query: str) -> list[int]:
        r = await client.get(f"/tasks?{query}")
        assert r.status_code == 200, r.text
        return row_ids(r.text)

    assert await ids_for("caller=alice") == [ids["failed"], ids["report"]]
    assert await ids_for("status=succeeded") == [ids["search"]]
    assert await ids_for("department=search") == [ids["search"]]
    assert await ids_for("tool=build_report&status=failed") == [ids["failed"]]
    assert await ids_for("pattern=background") == [ids["failed"], ids["report"]]
    soon = (utcnow() + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
    assert await ids_for(f"until={soon}") == sorted(ids.values(), reverse=True)
    assert await ids_for(f"since={soon}") == []
    # Blank form fields mean "any", as a submitted filter form sends them.
    assert len(await ids_for("caller=&status=&pattern=&since=&until=")) == 3
    # The fragment the live refresh swaps in has the same rows.
    rows = (await client.get("/tasks/rows?caller=bob")).text
    assert row_ids(rows) == [ids["search"]] and "<html" not in rows


async def test_tasks_page_pages_with_a_cursor(store, client):
    ids = [(await store.create(caller="c", tool="t", pattern="background")).id for _ in range(5)]
    first = (await client.get("/tasks?limit=2")).text
    assert row_ids(first) == ids[:-3:-1]
    older = html.unescape(re.search(r'href="([^"]+)">Older', first)[1])
    second = (await client.get(older)).text
    assert row_ids(second) == [ids[2], ids[1]]
    assert "Newest" in second


async def test_actions_offered_only_where_the_api_allows_them(store, client):
    ids = await seed(store)
    page = (await client.get("/tasks")).text
    assert f'hx-post="/api/tasks/{ids["report"]}/cancel"' in page  # queued background job
    assert f'hx-post="/api/tasks/{ids["failed"]}/retry"' in page  # failed background job
    assert f"/api/tasks/{ids['search']}/" not in page  # a finished in-turn task: neither
    assert page.count("hx-confirm=") == 2  # each action asks first


@pytest.mark.parametrize(
    "query",
    ["status=exploded", "pattern=x", "since=yesterday", "limit=0", "limit=abc", "before=1.5",
     "caller=" + "x" * 500, "since=2026-03-02T00:00&until=2026-03-01T00:00",
     "tool=a%00b"],
)  # fmt: skip
async def test_a_bad_filter_is_one_line_not_a_traceback(client, query):
    r = await client.get(f"/tasks?{query}")
    assert r.status_code == 400
    message = re.search(r'<p class="error" role="alert">([^<]+)</p>', r.text)
    assert message and "\n" not in message[1] and "Traceback" not in r.text
    assert (await client.get(f"/tasks/rows?{query}")).status_code == 400


async def test_task_page_shows_timeline_fields_and_redacted_args(store, client):
    args = pay.redact({"card": f"my card is {CARD}", "cvv": "123", "amount": "40.00"})
    t = await store.create(
        caller="alice", session_id="call-a", department="billing", tool="pay",
        pattern="background", args=args, idempotency_key="pay-k1",
    )  # fmt: skip
    await start_job(store, t.id, "runner-test")
    await store.set_progress(t.id, 0.5, "talking to the bank")
    await store.transition(t.id, "succeeded", result={"receipt": "R-7"})
    page = (await client.get(f"/tasks/{t.id}")).text
    for seen in ("runner-test", "pay-k1", "talking to the bank", "R-7", "started by", "1111"):
        assert seen in page, seen
    assert [m for m in re.findall(r'class="status s-(\w+)"', page)][1:] == [
        "queued", "running", "running", "succeeded",
    ]  # fmt: skip
    assert 'sse-connect="/api/events?task_id=' in page
    digits = re.sub(r"\D", "", page)
    assert "4111111111111111" not in digits and "[redacted]" in page
    panel = (await client.get(f"/tasks/{t.id}/panel")).text
    assert "talking to the bank" in panel and "<html" not in panel


async def test_everything_is_escaped(store, client):
    evil = "<script>alert(1)</script>"
    t = await store.create(
        caller=evil, session_id=evil, department=evil, tool="t", pattern="background",
        args={"q": evil},
    )  # fmt: skip
    await store.call_started(evil, evil)
    await store.call_handoff(evil, None, evil)
    await store.cancel(t.id, by=evil)
    for path in (
        "/tasks",
        f"/tasks/{t.id}",
        "/calls",
        "/calls/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/stats",
    ):
        r = await client.get(path)
        assert r.status_code == 200, path
        assert evil not in r.text and "&lt;script&gt;" in r.text, path


async def test_unknown_ids_are_404_pages(client):
    for path in ("/tasks/999999", "/calls/nope", "/tasks/999999/panel"):
        r = await client.get(path)
        assert r.status_code == 404 and "Traceback" not in r.text


async def test_calls_page_and_one_call(store, client):
    await store.call_started("call-a", "alice")
    await store.call_handoff("call-a", None, "triage")
    await store.call_handoff("call-a", "triage", "reports")
    await store.call_ended("call-a")
    await store.call_started("call-b", "bob")
    ids = await seed(store)
    listing = (await client.get("/calls")).text
    assert listing.index("call-b") < listing.index("call-a")  # newest first
    assert "in progress" in listing and "triage" in listing
    one = (await client.get("/calls/call-a")).text
    assert re.findall(r"<strong>(\w+)</strong>", one) == ["triage", "reports"]
    assert row_ids(one) == [ids["report"], ids["failed"]]
    assert "alice" in (await client.get("/calls?caller=alice")).text
    assert (await client.get("/calls?caller=a%00b")).status_code == 400  # the API's rule
    assert "call-b" not in (await client.get("/calls?caller=alice")).text


async def test_stats_page_embeds_chart_data(store, client):
    await seed(store)
    page = (await client.get("/stats")).text
    assert "chart.umd.min.js" in page and 'id="chart-durations"' in page
    data = re.search(r'<script type="application/json" id="stats-data">(.*?)</script>', page, re.S)
    import json

    charts = json.loads(data[1])
    assert charts["departments"]["reports"]["failed"] == 1
    assert charts["tools"]["web_search"]["succeeded"] == 1
    assert "web_search (search)" in charts["durations"]


async def test_login_attempts_are_limited_per_client_and_per_console(store, db_url):
    """Guessing the token: ten tries per client, then 429 with Retry-After (even for the right
    token). The count belongs to that console: another app in the same process starts clean."""
    token = "s3cret-for-the-limit"
    async for c in client_for(store, db_url, token=token):
        for _ in range(10):
            r = await c.post("/login", data={"token": "guess", "next": "/tasks"})
            assert r.status_code == 303 and "failed=1" in r.headers["location"]
        limited = await c.post("/login", data={"token": token, "next": "/tasks"})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    async for c in client_for(store, db_url, token=token):
        r = await c.post("/login", data={"token": token, "next": "/tasks"})
        assert r.status_code == 303 and r.headers["location"] == "/tasks"


async def test_login_form_posts_token_and_next(store, db_url):
    async for c in client_for(store, db_url, token="s3cret-for-the-form"):
        r = await c.get("/tasks")
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
        form = (await c.get("/login?next=/stats")).text
        assert 'action="/login"' in form and 'name="token"' in form and 'value="/stats"' in form
        assert 'value="/tasks"' in (await c.get("/login?next=//evil.example")).text
        done = await c.post("/login", data={"token": "s3cret-for-the-form", "next": "/stats"})
        assert done.status_code == 303 and done.headers["location"] == "/stats"
        assert (await c.get("/stats")).status_code == 200  # the cookie now opens pages
        bad = await c.post("/login", data={"token": "nope", "next": "/stats"})
        c.cookies.clear()
        assert "That token is not right" in (await c.get(bad.headers["location"])).text


@pytest.mark.backends("sqlite")  # headroom is an SQLite file's; Postgres keeps its own disk
async def test_every_page_shows_a_red_banner_while_the_store_is_in_trouble(
    store, db_url, monkeypatch
):
    """The operator sees what /api/health says without asking it: a disk under the headroom
    threshold (here: a threshold no disk meets) is a red banner on every page, naming it."""
    async for c in client_for(store, db_url):
        for path in ("/tasks", "/calls", "/stats"):
            assert 'role="alert"' not in (await c.get(path)).text
    monkeypatch.setenv("FRONTDESK_MIN_FREE_MB", str(10**9))
    async for c in client_for(store, db_url):
        for path in ("/tasks", "/calls", "/stats"):
            page = (await c.get(path)).text
            assert 'role="alert"' in page and "needs attention" in page, path
            assert "MB free on the filesystem of" in page
        assert (await c.get("/api/health")).status_code == 503
