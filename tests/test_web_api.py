"""The console's JSON API through httpx's ASGI transport, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import jobkit
import pytest
from webclient import console

from frontdesk.core.tools import tool
from frontdesk.db.models import utcnow

pytestmark = pytest.mark.backends("sqlite", "postgres")


async def _failed_job(store, caller="ann", tool_name="experiment", **extra):
    job = await store.create(caller=caller, tool=tool_name, pattern="background", args={}, **extra)
    await store.transition(job.id, "running")
    return await store.transition(job.id, "failed", error="it broke")


async def _mixed(store) -> list[int]:
    """Twelve tasks across callers, tools, departments, patterns and statuses."""
    ids = []
    for i in range(12):
        t = await store.create(
            caller=f"c{i % 3}",
            tool=("lookup", "charge", "experiment")[i % 3],
            pattern=("interruptible", "critical", "background")[i % 3],
            department=("search", "billing", "lab")[i % 3],
            session_id=f"s{i % 2}",
            status="running" if i % 4 else "queued",
        )
        if i % 4 == 1:
            await store.transition(t.id, "succeeded", result={"ok": i})
        ids.append(t.id)
    return ids


async def test_list_filters_and_pages_newest_first(db_url, store):
    ids = await _mixed(store)
    async with console(db_url, store=store) as (_, c):
        body = (await c.get("/api/tasks")).json()
        everything = body["tasks"]
        assert [t["id"] for t in everything] == ids[::-1] and body["next_before"] is None

        for key, value in [
            ("caller", "c1"),
            ("tool", "charge"),
            ("department", "lab"),
            ("pattern", "background"),
            ("status", "succeeded"),
            ("session_id", "s0"),
        ]:
            rows = (await c.get("/api/tasks", params={key: value})).json()["tasks"]
            expected = [t["id"] for t in everything if t[key] == value]
            assert expected and [r["id"] for r in rows] == expected, key

        both = (await c.get("/api/tasks", params={"caller": "c2", "tool": "experiment"})).json()
        assert [t["id"] for t in both["tasks"]] == ids[2::3][::-1]

        seen, before = [], None
        while True:
            params = {"limit": 5} | ({"before": before} if before else {})
            page = (await c.get("/api/tasks", params=params)).json()
            seen += [t["id"] for t in page["tasks"]]
            before = page["next_before"]
            if before is None:
                break
        assert seen == ids[::-1]


async def test_time_window(db_url, store):
    old = await store.create(caller="a", tool="lookup", pattern="interruptible")
    await asyncio.sleep(0.05)
    cut = utcnow()
    new = await store.create(caller="a", tool="lookup", pattern="interruptible")
    async with console(db_url, store=store) as (_, c):
        since = (await c.get("/api/tasks", params={"since": cut.isoformat()})).json()["tasks"]
        until = (await c.get("/api/tasks", params={"until": cut.isoformat()})).json()["tasks"]
        assert [t["id"] for t in since] == [new.id] and [t["id"] for t in until] == [old.id]
        # Another zone means the same instant; no zone means UTC.
        local = cut.astimezone(timezone(timedelta(hours=5)))
        shifted = (await c.get("/api/tasks", params={"since": local.isoformat()})).json()
        assert [t["id"] for t in shifted["tasks"]] == [new.id]
        later = (utcnow() + timedelta(hours=1)).isoformat()
        assert (await c.get("/api/tasks", params={"since": later})).json()["tasks"] == []
        assert len((await c.get("/api/tasks", params={"until": later})).json()["tasks"]) == 2
        both = {"since": cut.isoformat(), "until": later, "caller": "a"}
        assert [t["id"] for t in (await c.get("/api/tasks", params=both)).json()["tasks"]] == [
            new.id
        ]
        naive = cut.replace(tzinfo=None).isoformat()
        assert (await c.get("/api/tasks", params={"until": naive})).json()["tasks"][0][
            "id"
        ] == old.id


async def test_bad_input_is_a_json_4xx(db_url, store):
    async with console(db_url, store=store) as (_, c):
        for path, code in [
            ("/api/tasks?status=lost", 422),
            ("/api/tasks?pattern=sometimes", 422),
            ("/api/tasks?limit=0", 422),
            ("/api/tasks?limit=100000", 422),
            ("/api/tasks?before=-1", 422),
            ("/api/tasks?since=yesterday", 422),
            ("/api/tasks?caller=%00", 422),
            ("/api/tasks?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", 400),
            ("/api/tasks/0", 422),
            ("/api/tasks/99999999999999999999", 422),
            ("/api/tasks/abc", 422),
            ("/api/tasks/424242", 404),
            ("/api/tasks?since=0001-01-01T00:00:00%2B05:00", 422),
            ("/api/tasks?until=9999-12-31T23:59:59-05:00", 422),
            ("/api/calls/nobody", 404),
            ("/api/calls/%00x", 422),
            ("/api/calls/" + "x" * 101, 422),
            ("/api/calls?caller=%00", 422),
            ("/api/calls?before=soon", 422),
            ("/api/nothing-here", 404),
        ]:
            r = await c.get(path)
            assert r.status_code == code, (path, r.status_code, r.text)
            assert r.headers["content-type"] == "application/json"
            assert isinstance(r.json()["message"], str) and r.json()["message"], path
        assert (await c.get("/api/tasks/424242")).json()["message"] == "task 424242 not found"
        assert (await c.post("/api/tasks/424242/cancel")).status_code == 404
        assert (await c.post("/api/tasks/424242/retry")).status_code == 404


async def test_task_detail_has_events_and_progress(db_url, store):
    job = await store.create(
        caller="ann", tool="experiment", pattern="background", args={"name": "x"}, note="queued"
    )
    await store.transition(job.id, "running")
    await store.set_progress(job.id, 0.5, "halfway")
    await store.transition(job.id, "succeeded", result={"summary": "done"})
    async with console(db_url, store=store) as (_, c):
        body = (await c.get(f"/api/tasks/{job.id}")).json()
    assert body["status"] == "succeeded" and body["result"] == {"summary": "done"}
    assert body["args"] == {"name": "x"}
    assert [e["status"] for e in body["events"]] == ["queued", "running", "running", "succeeded"]
    assert body["events"][2]["note"] == "progress 50%: halfway"


async def test_cancel_writes_an_event_and_refuses_twice(db_url, store):
    job = await store.create(caller="ann", tool="experiment", pattern="background", args={})
    turn = await store.create(caller="ann", tool="charge", pattern="critical", status="running")
    async with console(db_url, store=store) as (_, c):
        r = await c.post(f"/api/tasks/{job.id}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        again = await c.post(f"/api/tasks/{job.id}/cancel")
        assert (
            again.status_code == 409
            and again.json()["message"] == f"task {job.id} already cancelled"
        )
        critical = await c.post(f"/api/tasks/{turn.id}/cancel")
        assert critical.status_code == 409 and "only background jobs" in critical.json()["message"]
    events = await store.events(job.id)
    assert events[-1] == {
        **events[-1],
        "status": "cancelled",
        "note": "cancelled by operator (web)",
    }
    assert (await store.get(turn.id)).status == "running"


async def test_retry_runs_again_under_the_same_key(db_url, store, registry, settings):
    """A failed job retried from the console is queued again on the same row; the runner's
    next attempt gets the job's own idempotency key, so it is the same logical job."""
    keys: list[str] = []

    @tool(pattern="background")
    async def flaky(ctx) -> dict:
        """Works the second time."""
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            raise RuntimeError("first try fails")
        return {"summary": "worked"}

    registry.tools["flaky"] = flaky
    async with jobkit.running(store, registry, settings):
        job = await jobkit.queue(store, settings, "flaky", caller="ann")
        failed = await jobkit.finished(store, job.id)
        assert failed.status == "failed" and failed.attempts == 1

        async with console(db_url, store=store) as (_, c):
            r = await c.post(f"/api/tasks/{job.id}/retry")
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "queued" and r.json()["error"] is None
            assert (await c.post(f"/api/tasks/{job.id}/retry")).status_code == 409

        done = await jobkit.finished(store, job.id)
    assert done.status == "succeeded" and done.result == {"summary": "worked"}
    assert done.attempts == 2 and keys == [f"job-{job.id}", f"job-{job.id}"]
    assert done.delivered_at is None  # the caller hears the new outcome
    notes = [e["note"] for e in await store.events(job.id)]
    assert "retried by operator (web): queued for attempt 2" in notes
    assert (notes[-2] or "").startswith("started by runner")


async def test_retry_refuses_what_is_not_a_failed_job(db_url, store):
    running = await store.create(caller="a", tool="experiment", pattern="background", args={})
    turn = await store.create(caller="a", tool="lookup", pattern="interruptible", status="running")
    await store.transition(turn.id, "failed", error="x")
    async with console(db_url, store=store) as (_, c):
        queued = await c.post(f"/api/tasks/{running.id}/retry")
        assert queued.status_code == 409 and queued.json()["status"] == "queued"
        in_turn = await c.post(f"/api/tasks/{turn.id}/retry")
        assert in_turn.status_code == 409 and "only background jobs" in in_turn.json()["message"]


async def test_calls_with_handoffs_and_tasks(db_url, store):
    await store.call_started("room-1", "ann")
    await store.call_handoff("room-1", "triage", "billing")
    t = await store.create(caller="ann", tool="charge", pattern="critical", session_id="room-1")
    await store.call_ended("room-1")
    await asyncio.sleep(0.01)
    await store.call_started("room-2", "bob")
    async with console(db_url, store=store) as (_, c):
        calls = (await c.get("/api/calls")).json()
        assert [x["session_id"] for x in calls["calls"]] == ["room-2", "room-1"]
        one = (await c.get("/api/calls", params={"caller": "ann"})).json()["calls"]
        assert [x["session_id"] for x in one] == ["room-1"] and one[0]["ended_at"]
        paged = (await c.get("/api/calls", params={"limit": 1})).json()
        rest = (await c.get("/api/calls", params={"before": paged["next_before"]})).json()
        assert [x["session_id"] for x in rest["calls"]] == ["room-1"]
        detail = (await c.get("/api/calls/room-1")).json()
    assert [(h["from"], h["to"]) for h in detail["handoffs"]] == [("triage", "billing")]
    assert [x["id"] for x in detail["tasks"]] == [t.id]


async def test_stats_per_department_and_tool(db_url, store):
    for seconds in (1, 2, 3):
        t = await store.create(
            caller="a", tool="report", pattern="background", department="reports", args={}
        )
        start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        await store.transition(t.id, "running", started_at=start)
        await store.transition(
            t.id, "succeeded", finished_at=start + timedelta(seconds=seconds), result={}
        )
    await _failed_job(store, department="lab")
    async with console(db_url, store=store) as (_, c):
        outcomes = (await c.get("/api/stats")).json()["outcomes"]
    by = {(o["department"], o["tool"], o["status"]): o for o in outcomes}
    ok = by[("reports", "report", "succeeded")]
    assert ok["count"] == 3 and ok["median_seconds"] == pytest.approx(2, abs=0.01)
    assert ok["p95_seconds"] == pytest.approx(3, abs=0.01)
    assert by[("lab", "experiment", "failed")]["count"] == 1


async def test_openapi_lists_the_api(db_url, store):
    async with console(db_url, store=store) as (_, c):
        spec = (await c.get("/openapi.json")).json()
    assert {
        "/api/tasks",
        "/api/tasks/{task_id}",
        "/api/tasks/{task_id}/cancel",
        "/api/tasks/{task_id}/retry",
        "/api/calls",
        "/api/calls/{session_id}",
        "/api/stats",
        "/api/events",
    } <= set(spec["paths"])


async def test_openapi_documents_every_status_and_how_to_authenticate(db_url, store):
    token = "openapi-token-0123456789"
    async with console(db_url, store=store, token=token) as (_, c):
        spec = (await c.get("/openapi.json", headers={"Authorization": f"Bearer {token}"})).json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["session"]["in"] == "cookie" and schemes["callAccess"]["in"] == "cookie"
    for path, item in spec["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            assert {"403", "503"} <= codes, (method, path)
            assert "Retry-After" in op["responses"]["503"]["headers"]
            if method == "post":
                assert "413" in codes, path
            if "pages" in op.get("tags", ()):
                assert "422" not in codes and ("400" in codes or not op.get("parameters"))
            elif not path.startswith("/call"):
                assert "401" in codes and op["security"] == [{"bearer": []}, {"session": []}]
    cancel = spec["paths"]["/api/tasks/{task_id}/cancel"]["post"]["responses"]
    assert {"200", "401", "403", "404", "409", "413", "422", "503"} <= set(cancel)
    assert "400" in spec["paths"]["/api/tasks"]["get"]["responses"]
    assert {"/tasks", "/calls", "/stats", "/api/docs", "/call/token"} <= set(spec["paths"])
    assert not any("head" in item for item in spec["paths"].values())
