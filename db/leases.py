"""TaskStore's leases on in-turn work: call processes renew theirs as a heartbeat, and
recovery finds the leases nobody renewed.

A lease is what tells a crash from slowness. A holder that stops renewing (its process died)
lets its task expire; recovery (core/runner.py) then fails the row left by the dead call.
Every step is compare-and-set on the lease, so a holder that was only slow keeps its task.
Background jobs hold no lease: DBOS runs them (core/runner.py, core/takeover.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from frontdesk.db.hotpath import Condition, DbNow, HotSql
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.queries import _sa_where
from frontdesk.db.records import Task
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

    async def renew(
        self, owner: str, lease_seconds: float, task_ids: Iterable[int] | None = None
    ) -> set[int]:
        """Extend ``owner``'s leases on running tasks; returns the ids still held (a task that
        was cancelled or reclaimed meanwhile is missing from the answer)."""
        cond: list[Condition] = [("lease_owner", "=", owner), ("status", "=", "running")]
        if task_ids is not None:
            ids = list(task_ids)
            if not ids:
                return set()
            cond.append(("id", "in", ids))
        # The database's clock, not this process's (db/hotpath.py DbNow).
        values = {"lease_expires_at": DbNow(lease_seconds)}
        if self._hot is not None:
            sql, params = self._hot.update(values, cond, returning=("id",))
            return await self._writer.run_raw(
                lambda conn, events: {r[0] for r in conn.execute(sql, params).fetchall()}
            )
        stmt = (
            update(tasks)
            .where(*_sa_where(cond))
            .values(lease_expires_at=DbNow(lease_seconds).clause())
            .returning(tasks.c.id)
        )

        async def write(conn: AsyncConnection, events: list[Any]) -> set[int]:
            return {r[0] for r in (await conn.execute(stmt)).all()}

        return await self._writer.run(write)

    async def expired(self) -> list[Task]:
        """Running tasks whose lease is past due by the database's clock."""
        stmt = select(tasks).where(
            tasks.c.status == "running",
            tasks.c.lease_expires_at.is_not(None),
            tasks.c.lease_expires_at < DbNow().clause(),
        )
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]

    async def leased(self) -> list[Task]:
        """Running in-turn tasks under a lease, due or not: what a runner watches for leases
        nobody renews (core/leasewatch.py). Few rows: the turns in flight right now."""
        stmt = select(tasks).where(
            tasks.c.status == "running",
            tasks.c.lease_expires_at.is_not(None),
            tasks.c.pattern != "background",
        )
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]
