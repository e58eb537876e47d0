"""TaskStore's reads: history, follow-ups, idempotency lookups and stats.

Reads use the store's read engine, so a long listing never waits on the writer's commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Float, and_, cast, func, literal_column, select

from frontdesk.db.errors import TaskNotFound
from frontdesk.db.hotpath import Condition, HotSql, read, sql_value
from frontdesk.db.models import FINISHED
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.records import Task, as_utc

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

tasks = TaskRow.__table__
events_t = TaskEventRow.__table__


# tasks.id is ``Integer``: 32-bit on Postgres (asyncpg refuses a larger bind), 64-bit on SQLite
# (where sqlite3 raises OverflowError past that). A number outside the narrower range names no
# task on either.
MAX_ID = 2**31 - 1


def valid_id(task_id: object) -> int:
    """``task_id`` as an int that can name a task, or ``TaskNotFound``: an id past the
    column's range would make the driver raise (DataError, OverflowError), not "not found"."""
    try:
        value = int(task_id)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        raise TaskNotFound(task_id) from None
    if not -MAX_ID <= value <= MAX_ID:
        raise TaskNotFound(task_id)
    return value


def _sa_where(where: Sequence[Condition]) -> list[Any]:
    """The SQLAlchemy form of hot-path conditions, so both paths share one definition."""
    out: list[Any] = []
    for name, op, value in where:
        col = tasks.c[name]
        value = sql_value(value)
        if op == "=":
            out.append(col == value)
        elif op == "<":
            out.append(col < value)
        elif op == ">=":
            out.append(col >= value)
        elif op == "LIKE":
            out.append(col.like(value))
        elif op == "in":
            out.append(col.in_(value))
        elif op == "is null":
            out.append(col.is_(None))
        else:
            raise ValueError(f"unknown operator {op!r}")
    return out


class TaskQueries:
    read_engine: AsyncEngine
    _hot: HotSql | None

    async def get(self, task_id: int, *, caller: str | None = None) -> Task:
        """The task, or ``TaskNotFound``; with ``caller`` another caller's task is not found."""
        task_id = valid_id(task_id)
        stmt = select(tasks).where(tasks.c.id == task_id)
        if caller is not None:
            stmt = stmt.where(tasks.c.caller == caller)
        async with self.read_engine.connect() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        if row is None:
            raise TaskNotFound(task_id)
        return Task.from_row(row)

    async def list(
        self,
        *,
        caller: str | None = None,
        status: str | None = None,
        tool: str | None = None,
        pattern: str | None = None,
        session_id: str | None = None,
        limit: int | None = 50,
    ) -> list[Task]:
        """Newest first."""
        stmt = select(tasks).order_by(tasks.c.id.desc())
        if caller is not None:
            stmt = stmt.where(tasks.c.caller == caller)
        if status is not None:
            stmt = stmt.where(tasks.c.status == status)
        if tool is not None:
            stmt = stmt.where(tasks.c.tool == tool)
        if pattern is not None:
            stmt = stmt.where(tasks.c.pattern == pattern)
        if session_id is not None:
            stmt = stmt.where(tasks.c.session_id == session_id)
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]

    async def events(self, task_id: int) -> list[dict[str, Any]]:
        try:
            task_id = valid_id(task_id)
        except TaskNotFound:
            return []
        stmt = select(events_t).where(events_t.c.task_id == task_id).order_by(events_t.c.id)
        async with self.read_engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            {"at": as_utc(r.at).isoformat(), "status": r.status, "note": r.note}  # type: ignore[union-attr]
            for r in rows
        ]

    async def pending_followups(self, callers: Iterable[str]) -> list[Task]:
        """Finished tasks nobody has told their caller about yet, oldest first."""
        names = list(callers)
        if not names:
            return []
        stmt = (
            select(tasks)
            .where(
                tasks.c.caller.in_(names),
                tasks.c.delivered_at.is_(None),
                tasks.c.status.in_(FINISHED),
            )
            .order_by(tasks.c.id)
        )
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]

    async def find_by_key(self, key: str) -> Task | None:
        async with self.read_engine.connect() as conn:
            row = (
                await conn.execute(select(tasks).where(tasks.c.idempotency_key == key))
            ).one_or_none()
        return Task.from_row(row) if row else None

    async def recent_keys(self, caller: str, tool: str, prefix: str, since: datetime) -> list[Task]:
        """Tasks of this caller and tool since ``since`` whose key starts with ``prefix``."""
        where: list[Condition] = [
            ("caller", "=", caller),
            ("tool", "=", tool),
            ("created_at", ">=", since),
            ("idempotency_key", "LIKE", prefix + "%"),
        ]
        hot = self._hot
        if hot is not None:
            # Every critical tool turn asks this before it runs; see db/hotpath.py.
            sql, params = hot.select(where)
            rows = await read(self.read_engine, lambda conn: conn.execute(sql, params).fetchall())
            return [Task(*hot.row(r)) for r in rows]
        stmt = select(tasks).where(*_sa_where(where)).order_by(tasks.c.id.desc())
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]

    async def stats(self) -> list[dict[str, Any]]:
        """Per department and status: count and median duration in seconds, aggregated in
        SQL (a million rows must not stream through Python)."""
        seconds = duration_seconds(self.read_engine.dialect.name)
        dept = func.coalesce(tasks.c.department, "-").label("department")
        finished = tasks.c.status.in_(FINISHED)
        counts = (
            select(dept, tasks.c.status, func.count().label("n"))
            .where(finished)
            .group_by(dept, tasks.c.status)
        )
        timed = and_(finished, tasks.c.started_at.is_not(None), tasks.c.finished_at.is_not(None))
        window = {"partition_by": (dept, tasks.c.status)}
        ranked = (
            select(
                dept,
                tasks.c.status,
                cast(seconds, Float).label("s"),
                func.row_number().over(order_by=seconds, **window).label("rn"),
                func.count().over(**window).label("n"),
            )
            .where(timed)
            .subquery()
        )
        # The upper median: the middle row, or the later of the two middle rows.
        medians = select(ranked.c.department, ranked.c.status, ranked.c.s).where(
            ranked.c.rn == literal_column("n / 2 + 1")
        )
        async with self.read_engine.connect() as conn:
            count_rows = (await conn.execute(counts)).all()
            median = {(r.department, r.status): r.s for r in (await conn.execute(medians)).all()}
        return [
            {
                "department": r.department,
                "status": r.status,
                "count": int(r.n),
                "median_seconds": median.get((r.department, r.status)),
            }
            for r in sorted(count_rows, key=lambda r: (r.department, r.status))
        ]

    async def count(self, **where: Any) -> int:
        stmt = select(func.count()).select_from(tasks)
        for k, v in where.items():
            stmt = stmt.where(tasks.c[k] == v)
        async with self.read_engine.connect() as conn:
            return int((await conn.execute(stmt)).scalar_one())


def duration_seconds(dialect: str) -> Any:
    """A task's run time in seconds, as SQL: statistics are aggregated in the database."""
    if dialect == "sqlite":
        return (func.julianday(tasks.c.finished_at) - func.julianday(tasks.c.started_at)) * 86400.0
    return func.extract("epoch", tasks.c.finished_at - tasks.c.started_at)
