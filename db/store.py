"""TaskStore: the one way every part of frontdesk reads and writes tasks, events and calls.

Writes go through a ``GroupWriter`` (one serialized writer, group commit). On SQLite the hot
writes (create, transition, progress, delivery, renew) run as plain SQL on the driver's
thread, a whole batch per hop (db/hotpath.py); everything else, and every write on Postgres,
uses SQLAlchemy Core. Reads use their own engine so a long listing never waits on a commit.
Each transition appends a task_event in the same transaction and, once committed, is passed to
the observers (the plugin host's ``on_task_event``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import ClauseElement

from frontdesk.db import fileguard
from frontdesk.db.actions import Actions
from frontdesk.db.browse import Browse
from frontdesk.db.calls import CallLog
from frontdesk.db.engine import (
    create_engine,
    is_sqlite,
    mask_url,
    settle_driver_threads,
    sqlite_path,
)
from frontdesk.db.errors import NotCancellable, StoreUnavailable
from frontdesk.db.hotpath import Add, Condition, DbNow, HotSql, hot_write, sql_value
from frontdesk.db.leases import Leases
from frontdesk.db.models import FINISHED, utcnow
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.outage import quiet, track
from frontdesk.db.queries import TaskQueries, _sa_where
from frontdesk.db.records import Task, TaskEvent, _event_for
from frontdesk.db.runners import Runners
from frontdesk.db.watch import CHANNEL
from frontdesk.db.writer import GroupWriter

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger("frontdesk.store")
tasks = TaskRow.__table__
events_t = TaskEventRow.__table__

# Which statuses may move to which. Transitions are compare-and-set on the current status, so a
# cancel racing a finish has exactly one winner.
ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    "running": ("queued",),
    "succeeded": ("running",),
    "failed": ("queued", "running"),
    "cancelled": ("queued", "running"),
    "queued": ("running",),
}

_INSERT_TASK = insert(tasks).returning(*tasks.c)
_INSERT_EVENT = insert(events_t)


class _TaskKeys(TypedDict):
    caller: str
    tool: str
    pattern: str


class NewTask(_TaskKeys, total=False):
    """What ``TaskStore.create`` takes: ``caller``, ``tool`` and ``pattern``, and optionally
    the rest (``status`` defaults to "queued"; ``note`` goes on the task's first event)."""

    status: str
    session_id: str | None
    department: str | None
    plugin: str | None
    args: dict[str, Any] | None
    idempotency_key: str | None
    lease_owner: str | None
    lease_seconds: float | None
    note: str | None


def _row_values(new: NewTask) -> dict[str, Any]:
    """The column values of a new task row."""
    unknown = set(new) - NewTask.__required_keys__ - NewTask.__optional_keys__
    if unknown:
        raise TypeError(f"unknown task fields: {', '.join(sorted(unknown))}")
    now = utcnow()
    status = new.get("status", "queued")
    lease_seconds = new.get("lease_seconds")
    return dict(
        caller=new["caller"],
        session_id=new.get("session_id"),
        department=new.get("department"),
        tool=new["tool"],
        plugin=new.get("plugin"),
        pattern=new["pattern"],
        status=status,
        args=new.get("args"),
        idempotency_key=new.get("idempotency_key"),
        attempts=1 if status == "running" else 0,
        lease_owner=new.get("lease_owner"),
        # By the database's clock (db/hotpath.py DbNow), as every renewal is.
        lease_expires_at=DbNow(lease_seconds) if lease_seconds else None,
        created_at=now,
        started_at=now if status == "running" else None,
    )


@dataclass
class _Recent:
    """Tasks to look for before an INSERT, in the same transaction (see create_unless_recent);
    what was found is left in ``found``, newest first."""

    conditions: list[Condition]
    key_prefix: str
    found: list[Task] = field(default_factory=list)


class TaskStore(TaskQueries, Browse, CallLog, Leases, Actions, Runners):
    def __init__(self, url: str) -> None:
        self.url = url
        self.read_engine: AsyncEngine = create_engine(url)
        self.write_engine: AsyncEngine = (
            create_engine(url, immediate=True) if is_sqlite(self.read_engine) else self.read_engine
        )
        # One log line per outage state change for the whole process (db/outage.py).
        track(self.read_engine.sync_engine)
        quiet("stamina")  # a retry through an outage is part of it, not a line of its own
        if self.write_engine is not self.read_engine:
            track(self.write_engine.sync_engine)
        self.observers: list[Callable[[TaskEvent], None]] = []
        self.file_guard: fileguard.FileGuard | None = None  # set by open() on SQLite
        # On Postgres each commit that changed a task NOTIFYs, so watchers in other processes
        # wake at once (db/watch.py); SQLite watchers read PRAGMA data_version instead.
        notify = None if is_sqlite(self.read_engine) else f"NOTIFY {CHANNEL}"
        self._writer = GroupWriter(self.write_engine, self._notify, notify=notify)
        # Plain SQL for the hot writes where the writer can run them on the driver's thread.
        self._hot: HotSql | None = (
            HotSql(self.write_engine.dialect, [f.name for f in fields(Task)])
            if self._writer.raw
            else None
        )

    @classmethod
    async def open(
        cls, url: str, *, prepare: Callable[[TaskStore], Awaitable[None]] | None = None
    ) -> TaskStore:
        """A store on ``url``; ``prepare`` (frontdesk.core.schema brings the schema to its
        heads) runs first, and a database that cannot be reached is one ``StoreUnavailable``."""
        store = cls(url)
        try:
            if prepare is not None:
                await prepare(store)
        except (SQLAlchemyError, OSError) as exc:
            await store.close()
            await settle_driver_threads()
            reason = getattr(exc, "orig", None) or exc
            raise StoreUnavailable(f"cannot open database {mask_url(url)}: {reason}") from None
        except BaseException:
            await store.close()
            raise
        store.guard_files()
        return store

    def guard_files(self) -> None:
        """Refuse writes once the SQLite files are deleted or replaced (db/fileguard.py)."""
        path = sqlite_path(self.url)
        if self.file_guard is None and path is not None:
            self.file_guard = fileguard.acquire(path)
            self._writer.guard = self.file_guard.check if self.file_guard else None

    @property
    def dialect(self) -> str:
        return self.read_engine.dialect.name

    async def close(self) -> None:
        await self._writer.aclose()
        if self.file_guard is not None:
            self._writer.guard = None
            fileguard.release(self.file_guard)
            self.file_guard = None
        await self.read_engine.dispose()
        if self.write_engine is not self.read_engine:
            await self.write_engine.dispose()

    def _notify(self, events: list[Any]) -> None:
        # Runs inside the writer's commit: an observer's error must not fail other writes.
        for event in events:
            for observer in self.observers:
                try:
                    observer(event)
                except Exception:
                    log.exception("task event observer %r failed", observer)

    # -- writes ---------------------------------------------------------------------------

    async def run_write(self, write: Callable[[AsyncConnection, list[Any]], Any]) -> Any:
        """Run ``write(conn, events)`` in the serialized writer (plugins' own tables, e.g. the
        billing ledger, share its transactions and group commit); returns its result."""
        return await self._writer.run(write)

    async def create(self, **new: Unpack[NewTask]) -> Task:
        """Insert a task and its first event."""
        task = await self._insert(_row_values(new), new.get("note"), None)
        assert task is not None  # only a lookup can stop an INSERT
        return task

    async def create_unless_recent(
        self, *, key_prefix: str, since: datetime, **new: Unpack[NewTask]
    ) -> tuple[Task | None, list[Task]]:
        """``create(**new)`` unless this caller's tool has tasks created since ``since``
        whose key starts with ``key_prefix``: ``(new task, [])``, or ``(None, those tasks
        newest first)``. The lookup and the INSERT are one write transaction, so a critical
        call pays no separate read and two processes cannot both create a first attempt."""
        recent = _Recent(
            [
                ("caller", "=", new["caller"]),
                ("tool", "=", new["tool"]),
                ("created_at", ">=", since),
                ("idempotency_key", "LIKE", key_prefix + "%"),
            ],
            key_prefix,
        )
        task = await self._insert(_row_values(new), new.get("note"), recent)
        return task, recent.found

    async def _insert(
        self, values: dict[str, Any], note: str | None, recent: _Recent | None
    ) -> Task | None:
        """INSERT a task and its event in one write; with ``recent``, only if no task matches
        its conditions (looked up first, in the same transaction)."""
        now = values["created_at"]
        hot = self._hot
        if hot is not None:
            sql, params = hot.insert(values)
            insert_one = hot_write(hot, sql, params, now, note)
            if recent is None:
                return await self._writer.run_raw(insert_one)
            select_sql, select_params = hot.select(recent.conditions)

            def insert_unless(conn: Any, events: list[Any]) -> Task | None:
                rows = conn.execute(select_sql, select_params).fetchall()
                recent.found[:] = [Task(*hot.row(r)) for r in rows]
                return None if recent.found else insert_one(conn, events)

            return await self._writer.run_raw(insert_unless)

        async def write(conn: AsyncConnection, events: list[Any]) -> Task | None:
            if recent is not None:
                if conn.dialect.name == "postgresql":
                    # READ COMMITTED would let two processes both see nothing and both
                    # insert; this lock, held to the commit, queues the second behind the first.
                    lock = func.pg_advisory_xact_lock(func.hashtext(recent.key_prefix))
                    await conn.execute(select(lock))
                lookup = select(tasks).where(*_sa_where(recent.conditions))
                rows = (await conn.execute(lookup.order_by(tasks.c.id.desc()))).all()
                recent.found[:] = [Task.from_row(r) for r in rows]
                if recent.found:
                    return None
            if any(isinstance(v, DbNow) for v in values.values()):
                stmt = insert(tasks).values({k: sql_value(v) for k, v in values.items()})
                row = (await conn.execute(stmt.returning(*tasks.c))).one()
            else:
                row = (await conn.execute(_INSERT_TASK, values)).one()
            task = Task.from_row(row)
            await conn.execute(
                _INSERT_EVENT, {"task_id": task.id, "at": now, "status": task.status, "note": note}
            )
            events.append(_event_for(task, note, now))
            return task

        return await self._writer.run(write)

    async def transition(
        self,
        task_id: int,
        status: str,
        *,
        note: str | None = None,
        expect: Sequence[str] | None = None,
        owner: str | None = None,
        lease_expired: bool = False,
        lease: datetime | None = None,
        **values: Any,
    ) -> Task | None:
        """Move a task to ``status`` if it is in one of ``expect`` (default: every status that
        may move there). Returns the updated task, or None if another writer got there first.
        With ``owner``, only while that lease holder still holds it; with ``lease_expired``,
        only while its lease is still past due by the database's clock (a holder that renewed
        in time keeps its task); with ``lease``, only while the lease is still exactly that
        value (nobody renewed it since it was judged, core/leasewatch.py).
        Extra keyword arguments set columns (result=, error=, delivered_at=, ...)."""
        now = utcnow()
        values["status"] = status
        if status == "running":
            values.setdefault("started_at", now)
        if status in FINISHED:
            values.setdefault("finished_at", now)
            values.setdefault("lease_owner", None)
            values.setdefault("lease_expires_at", None)
        where: list[Condition] = [
            ("id", "=", task_id),
            ("status", "in", expect or ALLOWED_FROM[status]),
        ]
        if owner is not None:
            where.append(("lease_owner", "=", owner))
        if lease_expired:
            where.append(("lease_expires_at", "<", DbNow()))
        if lease is not None:
            where.append(("lease_expires_at", "=", lease))
        return await self._change(values, where, now, note)

    async def _change(
        self,
        values: dict[str, Any],
        where: list[Condition],
        now: datetime,
        note: str | None,
    ) -> Task | None:
        """UPDATE one task where every condition holds and append its event (status as
        updated), in one write; the updated task, or None if no row matched."""
        hot = self._hot
        if hot is not None and not any(isinstance(v, ClauseElement) for v in values.values()):
            sql, params = hot.update(values, where)
            return await self._writer.run_raw(hot_write(hot, sql, params, now, note))
        values = {
            k: tasks.c[k] + v.n if isinstance(v, Add) else sql_value(v) for k, v in values.items()
        }
        stmt = update(tasks).where(*_sa_where(where)).values(**values).returning(*tasks.c)

        async def write(conn: AsyncConnection, events: list[Any]) -> Task | None:
            row = (await conn.execute(stmt)).one_or_none()
            if row is None:
                return None
            task = Task.from_row(row)
            await conn.execute(
                _INSERT_EVENT, {"task_id": task.id, "at": now, "status": task.status, "note": note}
            )
            events.append(_event_for(task, note, now))
            return task

        return await self._writer.run(write)

    async def cancel(self, task_id: int, *, by: str, caller: str | None = None) -> Task:
        """Cancel a queued or running background job, the one rule behind the cancel tool,
        `frontdesk tasks cancel` and the app's RPC. With ``caller``, another caller's task is
        ``TaskNotFound``. Whoever cancels knows, so the task is marked delivered (no
        follow-up). Use ``frontdesk.core.jobs.cancel_job``, which tells DBOS first; a running
        job's runner sees the row cancelled within a poll and stops it."""
        task = await self.get(task_id, caller=caller)
        if task.pattern != "background":
            raise NotCancellable(task, "not background")
        reason = f"cancelled by {by}"
        done = await self.transition(
            task.id, "cancelled", error=reason, note=reason, delivered_at=utcnow()
        )
        if done is None:
            raise NotCancellable(await self.get(task.id), "finished")
        return done

    async def set_progress(self, task_id: int, fraction: float, note: str = "") -> None:
        label = f"progress {round(fraction * 100)}%" + (f": {note}" if note else "")
        await self._change(
            {"progress": fraction, "progress_note": note[:500] or None},
            [("id", "=", task_id), ("status", "=", "running")],
            utcnow(),
            label,
        )

    async def mark_delivered(self, task_id: int, note: str = "delivered") -> bool:
        """Set delivered_at once; False if it was already delivered (or never finished)."""
        now = utcnow()
        where: list[Condition] = [
            ("id", "=", task_id),
            ("delivered_at", "is null", None),
            ("status", "in", FINISHED),
        ]
        return await self._change({"delivered_at": now}, where, now, note) is not None


async def wait_for(
    store: TaskStore, predicate: Callable[[], Any], timeout: float, interval: float = 0.05
) -> Any:
    """Poll an async predicate until it returns something truthy (used by tests and simulate)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value or loop.time() >= deadline:
            return value
        await asyncio.sleep(interval)


__all__ = ["ALLOWED_FROM", "Task", "TaskEvent", "TaskStore", "wait_for"]
