"""The TaskStore on SQLite and Postgres: every transition, its events, leases, follow-ups and
calls."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from jobkit import start_job

from frontdesk.core.errors import TaskNotFound
from frontdesk.core.schema import open_store
from frontdesk.db.models import utcnow
from frontdesk.db.store import ALLOWED_FROM, TaskStore

pytestmark = pytest.mark.backends("sqlite", "postgres")


async def test_create_and_every_allowed_transition(store: TaskStore):
    seen = []
    store.observers.append(seen.append)
    for target, sources in ALLOWED_FROM.items():
        for source in sources:
            task = await store.create(caller="c", tool="t", pattern="background", status=source)
            done = await store.transition(task.id, target, note=f"{source}->{target}")
            assert done is not None and done.status == target, (source, target)
            events = await store.events(task.id)
            assert [e["status"] for e in events] == [source, target]
            assert events[-1]["note"] == f"{source}->{target}"
            if target in ("succeeded", "failed", "cancelled"):
                assert done.finished_at is not None and done.lease_owner is None
    assert len(seen) == 2 * sum(len(v) for v in ALLOWED_FROM.values())
    assert {e.status for e in seen} >= {"queued", "running", "succeeded", "failed", "cancelled"}


async def test_forbidden_transitions_are_refused_without_an_event(store: TaskStore):
    task = await store.create(caller="c", tool="t", pattern="critical", status="running")
    assert await store.transition(task.id, "succeeded", result={"ok": True})
    for target in ("running", "failed", "cancelled", "succeeded", "queued"):
        assert await store.transition(task.id, target) is None
    assert [e["status"] for e in await store.events(task.id)] == ["running", "succeeded"]
    assert (await store.get(task.id)).result == {"ok": True}


async def test_cancel_racing_finish_has_one_winner(store: TaskStore):
    task = await store.create(caller="c", tool="t", pattern="background", status="running")
    results = await asyncio.gather(
        store.transition(task.id, "succeeded"), store.transition(task.id, "cancelled")
    )
    assert sum(r is not None for r in results) == 1
    assert len(await store.events(task.id)) == 2


async def test_get_list_filters_and_caller_isolation(store: TaskStore):
    a = await store.create(caller="alice", tool="search", pattern="interruptible", status="running")
    await store.create(caller="bob", tool="pay", pattern="critical", status="running")
    await store.transition(a.id, "succeeded")
    assert [t.caller for t in await store.list(caller="alice")] == ["alice"]
    assert [t.tool for t in await store.list(status="running")] == ["pay"]
    assert [t.caller for t in await store.list(tool="search")] == ["alice"]
    assert len(await store.list(limit=1)) == 1
    with pytest.raises(TaskNotFound):
        await store.get(a.id, caller="bob")
    with pytest.raises(TaskNotFound):
        await store.get(999)


async def test_followups_and_mark_delivered_once(store: TaskStore):
    job = await store.create(caller="alice", tool="report", pattern="background")
    assert await store.pending_followups(["alice"]) == []
    await start_job(store, job.id)
    await store.transition(job.id, "succeeded", result={"summary": "ok"})
    assert [t.id for t in await store.pending_followups(["alice"])] == [job.id]
    assert await store.pending_followups(["bob"]) == []
    assert await store.mark_delivered(job.id, note="delivered by triage")
    assert not await store.mark_delivered(job.id)
    assert await store.pending_followups(["alice"]) == []
    assert (await store.events(job.id))[-1]["note"] == "delivered by triage"


async def test_lease_renew_and_expiry_of_in_turn_work(store: TaskStore):
    row = await store.create(
        caller="c", tool="x", pattern="interruptible", status="running",
        lease_owner="call:1", lease_seconds=30,
    )  # fmt: skip
    assert row.attempts == 1 and row.lease_expires_at > utcnow()
    assert await store.renew("call:1", 30, [row.id]) == {row.id}
    assert await store.renew("call:2", 30, [row.id]) == set()
    assert await store.expired() == []
    assert await store.renew("call:1", -1, [row.id]) == {row.id}  # lease now in the past
    assert [t.id for t in await store.expired()] == [row.id]


async def test_owner_guard_on_finish(store: TaskStore):
    row = await store.create(
        caller="c", tool="x", pattern="critical", status="running", lease_owner="r1",
        lease_seconds=30,
    )  # fmt: skip
    assert await store.transition(row.id, "succeeded", owner="r2") is None
    assert await store.transition(row.id, "succeeded", owner="r1") is not None


async def test_group_commit_batches_concurrent_writers(store: TaskStore):
    before = store._writer.commits
    rows = await asyncio.gather(
        *(store.create(caller=f"c{i}", tool="t", pattern="background") for i in range(200))
    )
    assert len({r.id for r in rows}) == 200
    assert store._writer.commits - before < 50
    assert await store.count(status="queued") == 200


async def test_recent_keys_window(store: TaskStore):
    await store.create(
        caller="c", tool="pay", pattern="critical", status="running", idempotency_key="abc.1"
    )
    await store.create(
        caller="c", tool="pay", pattern="critical", status="running", idempotency_key="abd.1"
    )
    since = utcnow() - timedelta(seconds=60)
    assert [t.idempotency_key for t in await store.recent_keys("c", "pay", "abc", since)] == [
        "abc.1"
    ]
    assert await store.recent_keys("c", "pay", "abc", utcnow() + timedelta(seconds=1)) == []


async def test_create_unless_recent_inserts_only_the_first_attempt(store: TaskStore):
    fields = dict(caller="c", tool="pay", pattern="critical", status="running")
    since = utcnow() - timedelta(seconds=60)
    first, prior = await store.create_unless_recent(
        key_prefix="abc", since=since, idempotency_key="abc.1", **fields
    )
    assert first is not None and first.idempotency_key == "abc.1" and prior == []
    assert [e["status"] for e in await store.events(first.id)] == ["running"]

    # Same prefix at once from this store and from another (as another process would have):
    # one write wins, the others see it and insert nothing.
    other = await open_store(store.url)
    try:
        results = await asyncio.gather(
            *(
                s.create_unless_recent(
                    key_prefix="abd", since=since, idempotency_key=f"abd.{i}", **fields
                )
                for i, s in enumerate([store, other, store, other])
            )
        )
    finally:
        await other.close()
    assert sorted(row is None for row, _ in results) == [False, True, True, True]
    assert await store.count(tool="pay") == 2

    again, prior = await store.create_unless_recent(
        key_prefix="abc", since=since, idempotency_key="abc.2", **fields
    )
    assert again is None and [t.id for t in prior] == [first.id]
    # Outside the window the earlier attempt no longer counts.
    late, prior = await store.create_unless_recent(
        key_prefix="abc", since=utcnow() + timedelta(seconds=1), idempotency_key="abc.3", **fields
    )
    assert late is not None and prior == []
    assert await store.count(tool="pay") == 3


async def test_calls_and_handoffs(store: TaskStore):
    await store.call_started("s1", "alice")
    await store.call_handoff("s1", "triage", "billing")
    await store.call_handoff("s1", "billing", "triage")
    await store.call_ended("s1")
    call = await store.get_call("s1")
    assert call["caller"] == "alice" and call["ended_at"] is not None
    assert [(h["from"], h["to"]) for h in call["handoffs"]] == [
        ("triage", "billing"),
        ("billing", "triage"),
    ]


@pytest.mark.backends("sqlite")
async def test_sqlite_pragmas(store: TaskStore):
    async with store.read_engine.connect() as conn:
        mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
        fk = (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar()
        busy = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar()
    assert (mode, fk) == ("wal", 1) and busy >= 5000


async def test_stats_counts_and_medians_in_sql(store: TaskStore):
    durations = {"search": [1.0, 3.0, 2.0], "billing": [5.0]}
    for dept, secs in durations.items():
        for s in secs:
            t = await store.create(
                caller="c", tool="t", pattern="interruptible", status="running", department=dept
            )
            started = utcnow()
            await store.transition(
                t.id, "succeeded", started_at=started, finished_at=started + timedelta(seconds=s)
            )
    failed = await store.create(caller="c", tool="t", pattern="background", department="search")
    await store.transition(failed.id, "failed", error="x")  # never started: counted, not timed
    await store.create(
        caller="c", tool="t", pattern="background", department="search"
    )  # queued: not counted
    rows = {(r["department"], r["status"]): r for r in await store.stats()}
    assert set(rows) == {("billing", "succeeded"), ("search", "succeeded"), ("search", "failed")}
    assert rows[("search", "succeeded")]["count"] == 3
    assert abs(rows[("search", "succeeded")]["median_seconds"] - 2.0) < 0.01
    assert abs(rows[("billing", "succeeded")]["median_seconds"] - 5.0) < 0.01
    assert rows[("search", "failed")] == {
        "department": "search",
        "status": "failed",
        "count": 1,
        "median_seconds": None,
    }
