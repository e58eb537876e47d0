"""TaskStore's reads for the operator console: filtered pages of tasks and their counts per
status, the event log, calls with their tasks, and outcomes per department and tool.

Every listing is newest first and keyset-paged (``before`` an id, never OFFSET), and each
exact filter is served by a (column, id) index (migration 0003), so the first page costs
the same at a million rows as at a hundred. A substring filter (``caller_contains``,
``tool_contains``) walks the id index until the page is full: cheap when the text is common,
a scan of the table when it is rare.

``outcomes(engine, since)`` takes its engine, so the console can run it on a connection of its
own: a full-table aggregate must never hold the one read connection a listing waits for.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Float, and_, cast, func, literal_column, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from frontdesk.db.hotpath import Condition, HotSql, read
from frontdesk.db.models import FINISHED, Call
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.queries import _sa_where, duration_seconds
from frontdesk.db.records import Task, as_utc

tasks = TaskRow.__table__
events_t = TaskEventRow.__table__
calls_t = Call.__table__

# An entry of the event log: the event's own columns, the rest from its task.
_LOG_COLUMNS = [
    events_t.c.id,
    events_t.c.task_id,
    events_t.c.at,
    events_t.c.status,
    events_t.c.note,
    tasks.c.caller,
    tasks.c.session_id,
    tasks.c.department,
    tasks.c.tool,
    tasks.c.pattern,
    tasks.c.progress,
    tasks.c.attempts,
]


@dataclass(frozen=True)
class TaskFilter:
    """What a task listing may be narrowed by; None means any. ``since`` is inclusive,
    ``until`` exclusive, both on ``created_at`` (see ``Browse.page`` on their edges).
    ``caller_contains`` and ``tool_contains`` match a substring, in any case."""

    caller: str | None = None
    status: str | None = None
    department: str | None = None
    tool: str | None = None
    pattern: str | None = None
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    caller_contains: str | None = None
    tool_contains: str | None = None

    def conditions(self) -> list[Condition]:
        out: list[Condition] = []
        for name in ("caller", "status", "department", "tool", "pattern", "session_id"):
            value = getattr(self, name)
            if value is not None:
                out.append((name, "=", value))
        if self.since is not None:
            out.append(("created_at", ">=", self.since))
        if self.until is not None:
            out.append(("created_at", "<", self.until))
        return out

    def substrings(self) -> list[ColumnElement[bool]]:
        """The substring filters as SQL (wildcards in the text are escaped, not wildcards)."""
        out = []
        for column, text in (
            (tasks.c.caller, self.caller_contains),
            (tasks.c.tool, self.tool_contains),
        ):
            if text:
                out.append(column.icontains(text, autoescape=True))
        return out


def _log_entry(row: Any) -> dict[str, Any]:
    entry = dict(row._mapping)
    entry["at"] = as_utc(entry["at"]).isoformat()  # type: ignore[union-attr]
    return entry


def _call(row: Any) -> dict[str, Any]:
    call = dict(row._mapping)
    for key in ("started_at", "ended_at"):
        value = as_utc(call[key])
        call[key] = value.isoformat() if value is not None else None
    call["handoffs"] = list(call["handoffs"] or [])
    return call


_FIRST_FROM_SQL = "SELECT id FROM tasks WHERE created_at >= ? ORDER BY created_at LIMIT 1"


class Browse:
    read_engine: AsyncEngine
    _hot: HotSql | None

    async def _conditions(self, where: TaskFilter, before: int | None) -> list[Condition] | None:
        """``where`` as hot-path conditions with id bounds; None when nothing can match."""
        conds = where.conditions()
        upper = before
        # A time bound alone would walk the table by id until it found the page (or found
        # nothing). ids follow created_at (one writer per process stamps and inserts in order),
        # so each bound becomes an id bound found through ix_tasks_created_at as well. Only a
        # row stamped within another process's write-queue delay of the bound can differ.
        if where.since is not None:
            low = await self._first_id_from(where.since)
            if low is None:
                return None  # nothing was created at or after ``since``
            conds.append(("id", ">=", low))
        if where.until is not None:
            cut = await self._first_id_from(where.until)
            if cut is not None:
                upper = cut if upper is None else min(upper, cut)
        if upper is not None:
            conds.append(("id", "<", upper))
        if not conds:
            conds.append(("id", ">=", 1))  # the hot path's SELECT always has a WHERE
        return conds

    async def page(
        self, where: TaskFilter | None = None, *, limit: int = 50, before: int | None = None
    ) -> list[Task]:
        """At most ``limit`` tasks matching ``where`` with ids below ``before``, newest first."""
        where = where or TaskFilter()
        conds = await self._conditions(where, before)
        if conds is None:
            return []
        substrings = where.substrings()
        hot = self._hot
        if hot is not None and not substrings:
            # On SQLite one hop to the driver's thread (db/hotpath.py): the first page of a
            # listing costs about what the index lookup does.
            sql, params = hot.select(conds)
            sql, params = sql + " LIMIT ?", [*params, limit]
            rows = await read(self.read_engine, lambda conn: conn.execute(sql, params).fetchall())
            return [Task(*hot.row(r)) for r in rows]
        stmt = (
            select(tasks)
            .where(*_sa_where(conds), *substrings)
            .order_by(tasks.c.id.desc())
            .limit(limit)
        )
        async with self.read_engine.connect() as conn:
            return [Task.from_row(r) for r in (await conn.execute(stmt)).all()]

    async def status_counts(self, where: TaskFilter | None = None) -> dict[str, int]:
        """How many tasks match ``where`` (its ``status`` aside), per status."""
        where = replace(where or TaskFilter(), status=None)
        conds = await self._conditions(where, None)
        if conds is None:
            return {}
        stmt = (
            select(tasks.c.status, func.count())
            .where(*_sa_where(conds), *where.substrings())
            .group_by(tasks.c.status)
        )
        async with self.read_engine.connect() as conn:
            return {status: int(n) for status, n in (await conn.execute(stmt)).all()}

    async def _first_id_from(self, when: datetime) -> int | None:
        """The id of the first task (by created_at) created at or after ``when``."""
        hot = self._hot
        if hot is not None:
            sql, params = _FIRST_FROM_SQL, [hot.bind("created_at", when)]
            row = await read(self.read_engine, lambda conn: conn.execute(sql, params).fetchone())
            return row[0] if row else None
        stmt = (
            select(tasks.c.id)
            .where(tasks.c.created_at >= when)
            .order_by(tasks.c.created_at)
            .limit(1)
        )
        async with self.read_engine.connect() as conn:
            return (await conn.execute(stmt)).scalar()

    async def event_log(
        self, after: int, *, also: Collection[int] = (), limit: int = 500
    ) -> list[dict[str, Any]]:
        """Events with ids above ``after`` (and those ids in ``also``), oldest first, each with
        its task's caller, tool, department, pattern and progress."""
        cond = events_t.c.id > after
        if also:
            cond = or_(cond, events_t.c.id.in_(list(also)))
        stmt = (
            select(*_LOG_COLUMNS)
            .join(tasks, tasks.c.id == events_t.c.task_id)
            .where(cond)
            .order_by(events_t.c.id)
            .limit(limit)
        )
        async with self.read_engine.connect() as conn:
            return [_log_entry(r) for r in (await conn.execute(stmt)).all()]

    async def last_event_id(self) -> int:
        async with self.read_engine.connect() as conn:
            return int((await conn.execute(select(func.max(events_t.c.id)))).scalar() or 0)

    async def calls(
        self,
        *,
        caller: str | None = None,
        limit: int = 50,
        before: datetime | None = None,
        caller_contains: str | None = None,
    ) -> list[dict[str, Any]]:
        """Calls newest first (by start), each with its handoffs; ``before`` a start time."""
        stmt = select(calls_t)
        if caller is not None:
            stmt = stmt.where(calls_t.c.caller == caller)
        if caller_contains:
            stmt = stmt.where(calls_t.c.caller.icontains(caller_contains, autoescape=True))
        if before is not None:
            stmt = stmt.where(calls_t.c.started_at < before)
        stmt = stmt.order_by(calls_t.c.started_at.desc(), calls_t.c.session_id).limit(limit)
        async with self.read_engine.connect() as conn:
            return [_call(r) for r in (await conn.execute(stmt)).all()]

    async def call(self, session_id: str) -> dict[str, Any] | None:
        """One call with its handoffs and its tasks (oldest first), or None."""
        async with self.read_engine.connect() as conn:
            row = (
                await conn.execute(select(calls_t).where(calls_t.c.session_id == session_id))
            ).one_or_none()
            if row is None:
                return None
            stmt = select(tasks).where(tasks.c.session_id == session_id).order_by(tasks.c.id)
            rows = (await conn.execute(stmt)).all()
        return {**_call(row), "tasks": [Task.from_row(r) for r in rows]}

    async def outcomes(self, since: datetime | None = None) -> list[dict[str, Any]]:
        """``outcomes`` on the store's own read engine."""
        return await outcomes(self.read_engine, since)


async def outcomes(engine: AsyncEngine, since: datetime | None = None) -> list[dict[str, Any]]:
    """Per department, tool and finished status: the count and the median and p95 duration in
    seconds (nearest rank), aggregated in SQL, of the tasks created at or after ``since``."""
    seconds = duration_seconds(engine.dialect.name)
    dept = func.coalesce(tasks.c.department, "-").label("department")
    key = (dept, tasks.c.tool, tasks.c.status)
    finished = tasks.c.status.in_(FINISHED)
    if since is not None:
        finished = and_(finished, tasks.c.created_at >= since)
    counts = select(*key, func.count().label("n")).where(finished).group_by(*key)
    timed = and_(finished, tasks.c.started_at.is_not(None), tasks.c.finished_at.is_not(None))
    window = {"partition_by": key}
    ranked = (
        select(
            *key,
            cast(seconds, Float).label("s"),
            func.row_number().over(order_by=seconds, **window).label("rn"),
            func.count().over(**window).label("n"),
        )
        .where(timed)
        .subquery()
    )
    c = ranked.c
    # Nearest rank: the median is row n/2 + 1 (upper median), p95 row ceil(0.95 n).
    picks = select(c.department, c.tool, c.status, c.s, c.rn, c.n).where(
        or_(
            c.rn == literal_column("n / 2 + 1"),
            c.rn == literal_column("(n * 95 + 99) / 100"),
        )
    )
    async with engine.connect() as conn:
        count_rows = (await conn.execute(counts)).all()
        pick_rows = (await conn.execute(picks)).all()
    median: dict[tuple[str, str, str], float] = {}
    p95: dict[tuple[str, str, str], float] = {}
    for r in pick_rows:
        k = (r.department, r.tool, r.status)
        if r.rn == r.n // 2 + 1:
            median[k] = r.s
        if r.rn == (r.n * 95 + 99) // 100:
            p95[k] = r.s
    return [
        {
            "department": r.department,
            "tool": r.tool,
            "status": r.status,
            "count": int(r.n),
            "median_seconds": median.get((r.department, r.tool, r.status)),
            "p95_seconds": p95.get((r.department, r.tool, r.status)),
        }
        for r in sorted(count_rows, key=lambda r: (r.department, r.tool, r.status))
    ]
