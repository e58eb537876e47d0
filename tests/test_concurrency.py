"""Concurrency: two processes on one SQLite file with 100 calls each, and job claiming by
several runners (FOR UPDATE SKIP LOCKED on Postgres): no lock errors, no lost or doubled
work, every row accounted for."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import crashkit
import crashtrials
import pytest

from frontdesk.core.runner import Runner
from frontdesk.core.schema import open_store
from frontdesk.core.tools import tool


def test_two_processes_100_calls_each_on_one_sqlite_file(tmp_path, db_url):
    """Two `frontdesk simulate --callers 100` processes (each with its own embedded runner)
    share one SQLite file: no "database is locked", and every row of every call is there."""
    out = crashtrials.two_processes(db_url, tmp_path, calls=100)
    assert out.details["returncodes"] == [0, 0], out.details["stderr"]
    assert out.details["lock_errors"] == 0
    assert not any("Traceback" in e or "locked" in e.lower() for e in out.details["stderr"])
    events = out.details["events"]
    assert events["session_start"] == events["session_end"] == 200
    assert events.get("error", 0) == 0 and events.get("expect_failed", 0) == 0
    assert (out.rows, out.lost, out.doubled) == (600, 0, 0)
    # Every transition is in the audit trail.
    [(missing,)] = crashkit.query(
        db_url,
        "SELECT count(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM task_events e "
        "WHERE e.task_id = t.id AND e.status = 'succeeded')",
    )
    assert missing == 0
    assert out.details["runners"] == 2  # both processes' runners took jobs


@pytest.mark.backends("sqlite", "postgres")
async def test_concurrent_claims_from_two_stores_never_share_a_job(store, db_url):
    jobs = [await store.create(caller=f"c{i}", tool="t", pattern="background") for i in range(60)]
    other = await open_store(db_url)
    try:
        wave = await asyncio.gather(
            *(s.claim(f"r{n}", 30) for n in range(30) for s in (store, other))
        )
        claimed = [t.id for t in wave if t is not None]
        while (more := await other.claim("drain", 30)) is not None:
            claimed.append(more.id)
    finally:
        await other.close()
    assert sorted(claimed) == sorted(j.id for j in jobs)  # each once, none left behind
    assert len(claimed) >= 58  # SKIP LOCKED: a racing claim takes the next job, not nothing


@pytest.mark.backends("postgres")
async def test_claim_skips_a_job_another_worker_holds_locked(store, db_url):
    """What SKIP LOCKED buys: while one worker's transaction holds the oldest job, another
    takes the next one at once instead of queueing behind the lock."""
    from sqlalchemy import text

    from frontdesk.db.engine import create_engine

    first = await store.create(caller="c", tool="t", pattern="background")
    second = await store.create(caller="c", tool="t", pattern="background")
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:
            lock = text("SELECT id FROM tasks WHERE id = :id FOR UPDATE")
            await conn.execute(lock, {"id": first.id})  # held until rollback
            claimed = await asyncio.wait_for(store.claim("worker-b", 30), 3)
            assert claimed is not None and claimed.id == second.id
            await conn.rollback()
    finally:
        await engine.dispose()
    assert (await store.claim("worker-a", 30)).id == first.id


ran: list[int] = []


@tool(pattern="background")
async def tick(ctx, n: int = 0) -> str:
    """Count one run of this job."""
    ran.append(ctx.task_id)
    await asyncio.sleep(0.005)
    return "ok"


@pytest.mark.backends("sqlite", "postgres")
async def test_two_runners_run_every_job_exactly_once(store, db_url, registry, settings):
    ran.clear()
    registry.tools["tick"] = tick
    ids = [
        (await store.create(caller="c", tool="tick", pattern="background", args={"n": i})).id
        for i in range(150)
    ]
    other = await open_store(db_url)
    stop = asyncio.Event()
    runners = [
        Runner(s, registry, settings, owner=f"runner:test:{n}")
        for n, s in enumerate((store, other))
    ]
    loops = [asyncio.create_task(r.run(stop)) for r in runners]
    try:
        deadline = time.monotonic() + 60
        while await store.count(status="succeeded") < len(ids) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*loops)
        await other.close()
    counts = Counter(ran)
    assert sorted(counts) == sorted(ids) and set(counts.values()) == {1}
    rows = await store.list(tool="tick", limit=None)
    assert {t.status for t in rows} == {"succeeded"} and {t.attempts for t in rows} == {1}
    assert {t.lease_owner for t in rows} == {None}
    by = Counter()
    for t in rows:
        note = next(e["note"] for e in await store.events(t.id) if e["status"] == "running")
        by[note.split(" ")[2]] += 1
    assert set(by) == {"runner:test:0", "runner:test:1"}  # both took a share
