"""TaskStore's leases: the runner claims background jobs under a lease and renews it, call
processes renew theirs as a heartbeat, and recovery finds the leases nobody renewed.

A lease is what tells a crash from slowness. A holder that stops renewing (its process died)
lets its task expire; recovery (core/runner.py) then re-queues a background job or fails a row
left by a dead call. Every step is compare-and-set on the lease, so a holder that was only slow
keeps its task.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from frontdesk.db.hotpath import Condition, HotSql, hot_write
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.models import utcnow
from frontdesk.db.queries import _sa_where
from frontdesk.db.records import Task, _event_for
from frontdesk.db.writer import GroupWriter

tasks = TaskRow.__table__
_INSERT_EVENT = insert(TaskEventRow.__table__)


class Leases:
    read_engine: AsyncEngine
    _writer: GroupWriter
    _hot: HotSql | None

    if TYPE_CHECKING:

        @property
        def dialect(self) -> str: ...

        async def transition(
            self, task_id: int, status: str, *, note: str | None = None, **kw: Any
        ) -> Task | None: ...

    async def claim(self, owner: str, lease_seconds: float) -> Task | None:
        """Take the oldest queued background job under a lease, or None."""
        now = utcnow()
        if self._hot is not None:
            sql, params = self._hot.claim(owner, now + timedelta(seconds=lease_seconds), now)
            return await self._writer.run_raw(
                hot_write(
                    self._hot,
                    sql,
                    params,
                    now,
                    lambda task: f"claimed by {owner} (attempt {task.attempts})",
                )
            )
        pick = (
            select(tasks.c.id)
            .where(tasks.c.status == "queued", tasks.c.pattern == "background")
            .order_by(tasks.c.id)
            .limit(1)
        )
        if self.dialect == "postgresql":
            pick = pick.with_for_update(skip_locked=True)
        stmt = (
            update(tasks)
            .where(tasks.c.id == pick.scalar_subquery(), tasks.c.status == "queued")
            .values(
                status="running",
                lease_owner=owner,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                attempts=tasks.c.attempts + 1,
                started_at=now,
            )
            .returning(*tasks.c)
        )

        async def write(conn: AsyncConnection, events: list[Any]) -> Task | None:
            row = (await conn.execute(stmt)).one_or_none()
            if row is None:
                return None
            task = Task.from_row(row)
            note = f"claimed by {owner} (attempt {task.attempts})"
            await conn.execute(
                _INSERT_EVENT, {"task_id": task.id, "at": now, "status": "running", "note": note}
            )
            events.append(_event_for(task, note, now))
            return task

        return await self._writer.run(write)

    async def renew(
        self, owner: str, lease_seconds: float, task_ids: Iterable[int] | None = None
    ) -> set[int]:
        """Extend ``owner``'s leases on running tasks; returns the ids still held (a task that
        was cancelled or reclaimed meanwhile is missing from the answer)."""
        now = utcnow()
        cond: list[Condition] = [("lease_owner", "=", owner), ("status", "=", "running")]
        if task_ids is not None:
            ids = list(task_ids)
            if not ids:
                return set()
            cond.append(("id", "in", ids))
        values = {"lease_expires_at": now + timedelta(seconds=lease_seconds)}
        if self._hot is not None:
            sql, params = self._hot.update(values, cond, returning=("id",))
            return await self._writer.run_raw(
                lambda conn, events: {r[0] for r in conn.execute(sql, params).fetchall()}
            )
        stmt = update(tasks).where(*_sa_where(cond)).values(**values).returning(tasks.c.id)

        async def write(conn: AsyncConnection, events: list[Any]) -> set[int]:
            return {r[0] for r in (await conn.execute(stmt)).all()}

        return await self._writer.run(write)

    async def expired(self) -> list[Task]:
        """Running tasks whose holder stopped renewing: its process died."""
        now = utcnow()
        stmt = select(tasks).where(
            tasks.c.status == "running",
            tasks.c.lease_expires_at.is_not(None),
            tasks.c.lease_expires_at < now,
        )
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]

    async def release(
        self,
        owner: str,
        task_id: int,
        note: str,
        *,
        held_by: str | None = None,
        lease_expired: bool = False,
    ) -> Task | None:
        """Give a running job back to the queue (graceful shutdown or an expired lease).

        ``owner`` is who gives it back (for the log). ``held_by`` releases it only while that
        holder still holds the lease (a runner at shutdown gives back only its own jobs);
        ``lease_expired`` only while the lease is past due, so a holder that was merely slow and
        renewed after the scan keeps its job instead of it running twice."""
        return await self.transition(
            task_id,
            "queued",
            note=note,
            expect=("running",),
            owner=held_by,
            lease_expired=lease_expired,
            lease_owner=None,
            lease_expires_at=None,
            started_at=None,
        )
