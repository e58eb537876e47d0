"""Live events at /api/events, served by uvicorn on loopback, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import httpx
import pytest
from webclient import served, subscribe

pytestmark = pytest.mark.backends("sqlite", "postgres")

# Another process writing through the TaskStore, as the runner or a call process does.
WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from frontdesk.db.store import TaskStore

    async def main(url):
        store = await TaskStore.open(url)
        job = await store.create(caller="elsewhere", tool="experiment", pattern="background",
                                 args={}, note="queued by another process")
        await store.transition(job.id, "running")
        await store.set_progress(job.id, 0.5, "halfway")
        await store.transition(job.id, "succeeded", result={"summary": "ok"})
        await store.close()
        print(job.id)

    asyncio.run(main(sys.argv[1]))
    """
)


async def _write_elsewhere(url: str) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, url, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return int(out)


async def test_a_commit_in_another_process_reaches_every_client(db_url, store):
    async with served(db_url, store=store) as (app, base):
        async with subscribe(base) as one, subscribe(base) as two:
            writer = asyncio.create_task(_write_elsewhere(db_url))
            for client in (one, two):
                got = [await client.next() for _ in range(4)]
                assert [d["status"] for _, d in got] == [
                    "queued",
                    "running",
                    "running",
                    "succeeded",
                ]
                assert got[0][1]["note"] == "queued by another process"
                assert got[2][1]["note"] == "progress 50%: halfway"
                assert {d["caller"] for _, d in got} == {"elsewhere"}
                ids = [i for i, _ in got]
                assert ids == sorted(ids) and ids == [d["id"] for _, d in got]
            task_id = await writer
            assert {d["task_id"] for _, d in got} == {task_id}
        # One watcher read per wake served both clients, not one query loop each.
        assert app.state.hub.reads <= app.state.hub.watch.wakes + 2


async def test_last_event_id_resumes_after_that_event(db_url, store):
    job = await store.create(caller="a", tool="experiment", pattern="background", args={})
    await store.transition(job.id, "running")
    await store.transition(job.id, "failed", error="x")
    log = await store.event_log(0)
    assert len(log) == 3
    async with served(db_url, store=store) as (_, base):
        async with subscribe(base, headers={"Last-Event-ID": str(log[0]["id"])}) as events:
            replayed = [await events.next() for _ in range(2)]
            assert [i for i, _ in replayed] == [log[1]["id"], log[2]["id"]]
            assert [d["status"] for _, d in replayed] == ["running", "failed"]
            # Then live, without repeating what was replayed.
            await store.transition(job.id, "queued", expect=("failed",))
            event_id, data = await events.next()
            assert data["status"] == "queued" and event_id > log[2]["id"]


async def test_a_cancel_from_the_console_is_announced_to_its_task_stream(db_url, store):
    job = await store.create(caller="a", tool="experiment", pattern="background", args={})
    other = await store.create(caller="b", tool="experiment", pattern="background", args={})
    async with served(db_url, store=store) as (_, base):
        async with subscribe(base, params={"task_id": job.id}) as events:
            async with httpx.AsyncClient(base_url=base, headers={"Origin": base}) as c:
                assert (await c.post(f"/api/tasks/{other.id}/cancel")).status_code == 200
                assert (await c.post(f"/api/tasks/{job.id}/cancel")).status_code == 200
            _, data = await events.next()
    assert data["task_id"] == job.id and data["status"] == "cancelled"
    assert data["note"] == "cancelled by operator (web)"


async def test_an_id_committed_out_of_order_is_still_sent(db_url, store):
    """Postgres hands out event ids at INSERT and shows them at COMMIT: an event whose
    transaction commits after a later id's is still delivered (the hub's gap list)."""
    if store.dialect != "postgresql":
        pytest.skip("SQLite commits one writer at a time, in id order")
    from sqlalchemy import insert

    from frontdesk.db.models import TaskEvent, utcnow

    job = await store.create(caller="a", tool="experiment", pattern="background", args={})
    events_t = TaskEvent.__table__
    row = {"task_id": job.id, "at": utcnow(), "status": "queued"}
    async with served(db_url, store=store) as (_, base):
        async with subscribe(base) as events:
            async with store.write_engine.connect() as slow:
                await slow.begin()
                await slow.execute(insert(events_t).values(**row, note="slow"))  # takes id n
                await store.transition(job.id, "running")  # id n+1, committed first
                _, first = await events.next()
                assert first["status"] == "running"
                await slow.commit()
                await slow.exec_driver_sql("NOTIFY frontdesk_task_events")
            _, late = await events.next()
    assert late["note"] == "slow" and late["id"] < first["id"]


async def test_the_watch_wakes_on_another_process_commit(db_url, store):
    """The wake is the store's own signal (data_version on SQLite, NOTIFY from the writer on
    Postgres), not the fallback poll: with the fallback an hour away, a commit still wakes it."""
    from frontdesk.db.watch import ChangeWatch

    watch = ChangeWatch(db_url, interval=0.05, fallback=3600)
    try:
        await asyncio.wait_for(watch.wait(), 10)  # the first look (and LISTEN) returns at once
        waiting = asyncio.create_task(watch.wait())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # nothing changed yet
        await _write_elsewhere(db_url)
        await asyncio.wait_for(waiting, 10)
    finally:
        await watch.aclose()
