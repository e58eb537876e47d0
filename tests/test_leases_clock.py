"""Leases judged without comparing clocks across processes (issue 23 item 2), in-process on
SQLite and Postgres; tests/test_faults_clock.py runs real processes an hour off.

- ``lease_expires_at`` is written by the database (``now()`` on Postgres, ``strftime('now')``
  on SQLite) in the format every other DateTime is stored in, so comparisons stay right;
- a runner closes a lease only after it saw the same value, unrenewed, for a full lease on its
  own monotonic clock: a holder whose lease looks an hour past due (its clock is an hour
  behind) but renews is never closed, and one that stops renewing is closed after a lease;
- after the runner could not read the store (an outage, when nobody could renew), every holder
  gets a full lease again.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_recovery import left_running, watched

from frontdesk.core.leasewatch import LeaseWatch
from frontdesk.core.runner import RESTART, Runner
from frontdesk.db.hotpath import DbNow
from frontdesk.db.models import utcnow

pytestmark = pytest.mark.backends("sqlite", "postgres")


async def test_a_lease_is_stamped_by_the_database_clock_in_the_stored_format(store, db_url):
    before = utcnow()
    row = await store.create(
        caller="ada", tool="lookup", pattern="interruptible", status="running",
        lease_owner="call:1", lease_seconds=30,
    )  # fmt: skip
    after = utcnow()
    # This process and the database share a clock here, so the value is between the two.
    assert before + timedelta(seconds=29) < row.lease_expires_at < after + timedelta(seconds=31)
    assert (await store.get(row.id)).lease_expires_at == row.lease_expires_at
    if store.dialect == "sqlite":
        import sqlite3

        conn = sqlite3.connect(db_url.split(":///", 1)[1])
        [(text,)] = conn.execute("SELECT lease_expires_at FROM tasks WHERE id = ?", (row.id,))
        [(created,)] = conn.execute("SELECT created_at FROM tasks WHERE id = ?", (row.id,))
        conn.close()
        # "YYYY-MM-DD HH:MM:SS.ffffff", as SQLAlchemy stores every other DateTime.
        assert len(text) == len(created) == 26 and text[10] == " " and text[19] == "."
    # Past due by the database's clock only once the database says so.
    assert await store.renew("call:1", -1, [row.id]) == {row.id}
    assert [t.id for t in await store.expired()] == [row.id]
    done = await store.transition(
        row.id, "failed", expect=("running",), owner="call:1", lease_expired=True
    )
    assert done is not None and done.status == "failed"


async def test_a_holder_an_hour_behind_that_renews_is_never_closed(store, registry, settings):
    """Its leases are an hour past due by every other clock; it renews, so it lives."""
    behind = await store.create(
        caller="ada", tool="lookup", pattern="interruptible", status="running",
        lease_owner="call:behind", lease_seconds=-3600 + settings.job_lease_seconds,
    )  # fmt: skip
    dead = await left_running(store)
    runner = Runner(store, registry, settings)
    now = watched(runner)
    closed = []
    for _ in range(6):  # three leases of watching, renewing every half lease
        closed += await runner.recover()
        now[0] += settings.job_lease_seconds / 2
        renewed = await store.renew("call:behind", -3600 + settings.job_lease_seconds, [behind.id])
        assert renewed == {behind.id}
    assert [t.id for t in closed] == [dead]
    assert (await store.get(behind.id)).status == "running"
    assert (await store.get(dead)).error == RESTART


async def test_after_an_outage_every_holder_gets_a_full_lease_again(store, registry, settings):
    task_id = await left_running(store)
    runner = Runner(store, registry, settings)
    now = watched(runner)
    assert await runner.recover() == []
    now[0] += settings.job_lease_seconds - 1
    runner.leases.store_failed()  # the runner could not read the store: nobody could renew
    now[0] += 2
    assert await runner.recover() == []  # a full lease since the store came back, not yet
    now[0] += settings.job_lease_seconds
    assert [t.id for t in await runner.recover()] == [task_id]
    assert (await store.get(task_id)).lease_owner is None


def test_the_watch_forgets_rows_that_are_gone_and_restarts_on_a_new_value():
    clock = [0.0]
    watch = LeaseWatch(10.0, clock=lambda: clock[0])

    class Row:
        def __init__(self, id: int, lease: int) -> None:
            self.id, self.lease_expires_at = id, lease

    assert watch.stale([Row(1, 100), Row(2, 100)]) == []
    clock[0] = 10.0
    assert [r.id for r in watch.stale([Row(1, 100), Row(2, 200)])] == [1]  # 2 was renewed
    clock[0] = 15.0
    assert watch.stale([Row(2, 200)]) == [] and set(watch.seen) == {2}
    clock[0] = 20.0
    assert [r.id for r in watch.stale([Row(2, 200)])] == [2]


def test_db_now_modifier_is_what_sqlite_takes():
    assert DbNow(30).modifier() == "+30.000000 seconds"
    assert DbNow(-1.5).modifier() == "-1.500000 seconds"
