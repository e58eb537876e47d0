"""What an operator works from, on SQLite and on Postgres: the outcome and duration of each row,
no stale progress on finished rows, substring search, counts per status, a failure that can be
found in the logs, stats in a time window with a failure rate, and stats that never hold up a
listing (their own connection, one computation shared by concurrent requests, 503 with
Retry-After at worst)."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import timedelta

import pytest
from jobkit import finished, queue, running, start_job
from webclient import console

from frontdesk.core.tools import tool
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import utcnow

pytestmark = pytest.mark.backends("sqlite", "postgres")


def rows(page: str) -> dict[int, str]:
    """Each task row's HTML by id."""
    return {
        int(i): body for i, body in re.findall(r'<tr id="task-(\d+)"[^>]*>(.*?)</tr>', page, re.S)
    }


async def _finished(store, caller="ann", tool_name="lookup", status="succeeded", **values):
    t = await store.create(caller=caller, tool=tool_name, pattern="background", args={})
    await start_job(store, t.id)
    await store.set_progress(t.id, 0.95, "finishing up")
    await store.transition(t.id, status, **values)
    return t.id


async def test_rows_show_outcome_and_duration_and_no_stale_progress(db_url, store):
    done = await _finished(store, result={"summary": "three rooms free"})
    failed = await _finished(store, status="failed", error="the chart service timed out")
    running = (await store.create(caller="ann", tool="build", pattern="background", args={})).id
    await start_job(store, running)
    await store.set_progress(running, 0.4, "drawing charts")
    async with console(db_url, store=store) as (_, c):
        page = (await c.get("/tasks")).text
        by_id = rows(page)
        assert "three rooms free" in by_id[done] and "finishing up" not in by_id[done]
        assert "<progress" not in by_id[done] and "95%" not in by_id[done]
        assert "the chart service timed out" in by_id[failed] and "<progress" not in by_id[failed]
        assert "drawing charts" in by_id[running] and "40%" in by_id[running]
        assert re.search(r'<td class="num">\d+(\.\d)? (ms|s)</td>', by_id[done])
        panel = (await c.get(f"/tasks/{done}/panel")).text
        assert "<progress" not in panel and "Duration" in panel
        api = (await c.get(f"/api/tasks/{done}")).json()
        assert api["duration_seconds"] is not None and api["duration_seconds"] >= 0


async def test_substring_search_on_caller_and_tool(db_url, store):
    ids = {}
    for caller, tool_name in (
        ("Alice Smith", "generate_report"),
        ("alice.b", "pay_invoice"),
        ("bob", "report_card"),
        ("50%_off", "lookup"),
        ("5000 off", "lookup"),
    ):
        ids[caller] = (await store.create(caller=caller, tool=tool_name, pattern="critical")).id
    async with console(db_url, store=store) as (_, c):

        async def found(**params) -> set[str]:
            r = await c.get("/api/tasks", params=params)
            assert r.status_code == 200, r.text
            page = await c.get("/tasks", params=params)
            assert page.status_code == 200
            from_api = {t["caller"] for t in r.json()["tasks"]}
            assert {i for i, cid in ids.items() if cid in rows(page.text)} == from_api
            return from_api

        assert await found(caller_contains="LICE") == {"Alice Smith", "alice.b"}
        assert await found(tool_contains="report") == {"Alice Smith", "bob"}
        assert await found(caller_contains="alice", tool_contains="pay") == {"alice.b"}
        # Wildcards are text: "%_" is the two characters, not "anything".
        assert await found(caller_contains="%_") == {"50%_off"}
        assert await found(caller_contains="_") == {"50%_off"}
        assert await found(caller="alice") == set()  # caller= stays exact


async def test_counts_per_status_follow_the_filters(db_url, store):
    for _ in range(3):
        await _finished(store, caller="ann")
    await _finished(store, caller="ann", status="failed", error="x")
    await _finished(store, caller="bob")
    await store.create(caller="ann", tool="lookup", pattern="background")
    async with console(db_url, store=store) as (_, c):
        body = (await c.get("/api/tasks/counts", params={"caller": "ann"})).json()
        assert body == {"counts": {"succeeded": 3, "failed": 1, "queued": 1}, "total": 5}
        # The status filter itself does not narrow the counts: they are the tabs to pick from.
        same = await c.get("/api/tasks/counts", params={"caller": "ann", "status": "failed"})
        assert same.json() == body
        page = (await c.get("/tasks", params={"caller": "ann", "status": "failed"})).text
        tabs = dict(re.findall(r'data-status="(\w+)"[^>]*>\w+ <b>(\d+)</b>', page))
        assert tabs == {"queued": "1", "running": "0", "succeeded": "3", "failed": "1",
                        "cancelled": "0"}  # fmt: skip
        assert re.search(r"all <b>5</b>", page)


async def test_an_unexpected_failure_can_be_found_in_the_logs(
    db_url, store, registry, settings, caplog
):
    @tool(pattern="background")
    async def export(ctx) -> str:
        """Writes a file that is not there."""
        open("/nonexistent/frontdesk/export.csv").read()  # noqa: SIM115
        return "never"

    registry.tools["export"] = export
    with caplog.at_level(logging.ERROR):
        async with running(store, registry, settings):
            job = await queue(store, settings, "export")
            row = await finished(store, job.id)
    ref = re.fullmatch(r"internal error: FileNotFoundError \(ref ([0-9a-f]{8})\)", row.error)
    assert ref, row.error
    logged = [r for r in caplog.records if f"(ref {ref[1]})" in r.getMessage()]
    assert len(logged) == 1 and "export.csv" in logged[0].getMessage()
    assert "Traceback" in logged[0].getMessage() or "line" in logged[0].getMessage()
    async with console(db_url, store=store) as (_, c):
        page = (await c.get(f"/tasks/{job.id}")).text
        assert f"ref {ref[1]}" in page and "search the runner&#39;s log" in page
        assert "FileNotFoundError" in rows((await c.get("/tasks")).text)[job.id]


async def _aged(store, created_ago: timedelta, status: str, seconds: float, tool_name="lookup"):
    """A finished task created ``created_ago`` before now that ran ``seconds``."""
    from sqlalchemy import update

    tid = await _finished(
        store, tool_name=tool_name, status=status, error="x" if status == "failed" else None
    )
    start = utcnow() - created_ago
    t = TaskRow.__table__

    async def write(conn, events):
        await conn.execute(
            update(t)
            .where(t.c.id == tid)
            .values(
                created_at=start, started_at=start, finished_at=start + timedelta(seconds=seconds)
            )
        )

    await store.run_write(write)


async def test_stats_have_a_window_and_a_failure_rate(db_url, store):
    await _aged(store, timedelta(minutes=5), "succeeded", 1)
    await _aged(store, timedelta(minutes=5), "failed", 2)
    await _aged(store, timedelta(minutes=5), "cancelled", 1)
    await _aged(store, timedelta(hours=5), "succeeded", 40, tool_name="report")
    await _aged(store, timedelta(days=3), "failed", 1)
    async with console(db_url, store=store) as (_, c):
        hour = (await c.get("/api/stats", params={"window": "hour"})).json()
        assert hour["totals"] == {"succeeded": 1, "failed": 1, "cancelled": 1, "failure_rate": 0.5}
        day = (await c.get("/api/stats", params={"window": "day"})).json()
        assert day["totals"]["succeeded"] == 2 and day["totals"]["failed"] == 1
        tools = {t["tool"]: t for t in day["tools"]}
        assert tools["report"]["failure_rate"] == 0 and tools["report"][
            "median_seconds"
        ] == pytest.approx(40, abs=0.01)
        assert (await c.get("/api/stats", params={"window": "week"})).json()["totals"][
            "failed"
        ] == 2
        everything = (await c.get("/api/stats", params={"window": "all"})).json()
        assert everything["since"] is None and everything["totals"]["failed"] == 2
        assert (await c.get("/api/stats", params={"window": "year"})).status_code == 422
        page = (await c.get("/stats", params={"window": "hour"})).text
        assert 'id="failure-rate">50.0%</b>' in page and "in the last hour" in page


async def test_stats_never_hold_up_a_listing(db_url, store):
    await _finished(store)
    async with console(db_url, store=store) as (app, c):
        stats = app.state.stats
        first = await c.get("/api/stats")
        assert first.status_code == 200 and stats.computed == 1
        assert stats.engine is not None and stats.engine is not store.read_engine
        # An aggregate in progress (it holds the one-at-a-time lock and, on SQLite, the stats
        # engine's one connection); the cached answer expired.
        stats.ttl = 0
        async with stats._one_at_a_time, stats.engine.connect() as held:
            await held.exec_driver_sql("SELECT 1")
            waiting = [asyncio.create_task(c.get("/api/stats")) for _ in range(20)]
            await asyncio.sleep(0)
            listing = await c.get("/api/tasks", params={"limit": 50})  # does not wait on them
            assert listing.status_code == 200 and not any(w.done() for w in waiting)
            assert (await c.get("/tasks")).status_code == 200
        answers = await asyncio.gather(*waiting)
        assert {a.status_code for a in answers} == {200}
        assert stats.computed == 2  # twenty requests, one aggregate
        # A request that would wait too long is told when to come back.
        stats.wait = 0.05
        async with stats._one_at_a_time:
            busy = await c.get("/api/stats")
            page = await c.get("/stats")
        assert busy.status_code == 503 and busy.headers["retry-after"] == "5"
        assert page.status_code == 503 and page.headers["retry-after"] == "5"
