"""Driver-level SQL for the TaskStore's hot writes on SQLite.

Every tool turn writes two to four state changes, so their cost is paid per turn. Through
SQLAlchemy each one took about 1.3 ms of event-loop CPU (statement compile-cache lookups,
parameter processing, the greenlet bridge, and one aiosqlite thread hop per statement plus
BEGIN and COMMIT). Here the statements are plain SQL strings built once per shape, and the
GroupWriter runs a whole batch (BEGIN IMMEDIATE, every UPDATE/INSERT, COMMIT) in one hop to
the driver's thread. docs/performance.md has the numbers.

Values are still converted by SQLAlchemy's own bind and result processors for each column's
type, so what is stored and read back is exactly what the Core statements store and read back
(JSON text, DateTime strings, NULLs). Only SQLite takes this path; Postgres keeps the Core
statements (asyncpg is already one round trip per statement and has no thread hop).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import DateTime, Float, String, bindparam
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import CompileError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement

from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import TaskEvent as TaskEventRow
from frontdesk.db.records import Task, _event_for

if TYPE_CHECKING:
    from frontdesk.db.writer import RawWrite

Processor = Callable[[Any], Any] | None
# (column, operator, value); operator is one of _BINARY, "in" or "is null" (value ignored)
Condition = tuple[str, str, Any]

_BINARY = ("=", "<", ">=", "LIKE")


class Add:
    """A value that adds to the column instead of replacing it (``attempts`` + 1), on either
    path: ``HotSql.update`` writes ``col = col + ?``, the Core path ``col + n``."""

    def __init__(self, n: int) -> None:
        self.n = n


class DbNow:
    """The database's clock plus ``seconds``, evaluated by the database in the statement, on
    either path: lease expiry must not be judged by one process's wall clock against another's
    (a call process an hour ahead would let a runner fail its live turns). Postgres:
    ``now() + interval``; SQLite: its own ``strftime('now')`` in the stored DateTime format
    (``YYYY-MM-DD HH:MM:SS.ffffff``, so text comparisons with stored values stay correct)."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = float(seconds)

    def modifier(self) -> str:
        """The SQLite ``strftime`` modifier for the offset."""
        return f"{self.seconds:+.6f} seconds"

    def clause(self) -> ColumnElement[Any]:
        """The same for SQLAlchemy Core statements (either dialect)."""
        return _db_now(
            bindparam(None, self.seconds, type_=Float()),
            bindparam(None, self.modifier(), type_=String()),
        )


class _db_now(FunctionElement[Any]):
    type = DateTime(timezone=True)
    inherit_cache = True
    name = "db_now"


@compiles(_db_now, "postgresql")
def _db_now_postgres(element: _db_now, compiler: Any, **kw: Any) -> str:
    seconds, _ = list(element.clauses)
    return f"(now() + make_interval(secs => {compiler.process(seconds, **kw)}))"


@compiles(_db_now, "sqlite")
def _db_now_sqlite(element: _db_now, compiler: Any, **kw: Any) -> str:
    _, modifier = list(element.clauses)
    return SQLITE_NOW.replace("?", compiler.process(modifier, **kw))


def sql_value(value: Any) -> Any:
    """A value as a Core statement takes it: a ``DbNow`` becomes its SQL."""
    return value.clause() if isinstance(value, DbNow) else value


# SQLite's 'now' has millisecond precision (%f is SS.SSS); three zeros make the microseconds
# SQLAlchemy stores, so the value reads back as any stored DateTime does.
SQLITE_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now', ?) || '000')"


_tasks = TaskRow.__table__
_events = TaskEventRow.__table__


class HotSql:
    """Plain SQL and value conversion for ``tasks`` and ``task_events`` on one dialect.

    ``columns`` is the order rows come back in (the ``Task`` dataclass's fields), so a row
    converts to a ``Task`` positionally.
    """

    def __init__(self, dialect: Dialect, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        quote = dialect.identifier_preparer.quote
        self._q: dict[str, str] = {c.name: quote(c.name) for c in _tasks.c}
        self._bind: dict[str, Processor] = {
            c.name: c.type.dialect_impl(dialect).bind_processor(dialect) for c in _tasks.c
        }
        self._result: list[tuple[Processor, bool]] = []
        for name in self.columns:
            col = _tasks.c[name]
            aware = isinstance(col.type, DateTime) and bool(col.type.timezone)
            self._result.append(
                (col.type.dialect_impl(dialect).result_processor(dialect, None), aware)
            )
        self._returning = " RETURNING " + ", ".join(self._q[c] for c in self.columns)
        self._at = _events.c.at.type.dialect_impl(dialect).bind_processor(dialect)
        self.event_sql = (
            f"INSERT INTO {quote(_events.name)} (task_id, {quote('at')}, status, note) "
            "VALUES (?, ?, ?, ?)"
        )
        self._table = quote(_tasks.name)
        self._cache: dict[Any, str] = {}

    # -- values -----------------------------------------------------------------------------

    def _param(self, column: str, value: Any) -> Any:
        proc = self._bind[column]
        return value if proc is None else proc(value)

    def bind(self, column: str, value: Any) -> Any:
        """``value`` as the driver takes it for ``column`` (a DateTime becomes its string)."""
        return self._param(column, value)

    def _check(self, names: Iterable[str]) -> None:
        unknown = [n for n in names if n not in self._bind]
        if unknown:
            # What SQLAlchemy says for the same mistake, so callers see one error either way.
            raise CompileError(f"Unconsumed column names: {', '.join(unknown)}")

    def row(self, row: Sequence[Any]) -> list[Any]:
        """A RETURNING row as Python values in ``columns`` order (datetimes in UTC)."""
        out = []
        for value, (proc, aware) in zip(row, self._result, strict=True):
            if proc is not None and value is not None:
                value = proc(value)
            if aware and value is not None and value.tzinfo is None:
                value = value.replace(tzinfo=timezone.utc)
            out.append(value)
        return out

    def event(self, task_id: int, at: datetime, status: str, note: str | None) -> list[Any]:
        return [task_id, self._at(at) if self._at else at, status, note]

    # -- statements -------------------------------------------------------------------------

    def insert(self, values: dict[str, Any]) -> tuple[str, list[Any]]:
        """INSERT one task RETURNING it."""
        key = ("insert", tuple(values), tuple(_now(v) for v in values.values()))
        sql = self._cache.get(key)
        if sql is None:
            self._check(values)
            cols = ", ".join(self._q[c] for c in values)
            marks = ", ".join(self._mark(v) for v in values.values())
            sql = f"INSERT INTO {self._table} ({cols}) VALUES ({marks}){self._returning}"
            self._cache[key] = sql
        return sql, [self._value(k, v) for k, v in values.items()]

    @staticmethod
    def _mark(value: Any) -> str:
        return SQLITE_NOW if isinstance(value, DbNow) else "?"

    def _value(self, column: str, value: Any) -> Any:
        return value.modifier() if isinstance(value, DbNow) else self._param(column, value)

    def _where(self, where: Sequence[Condition]) -> str:
        """The SQL of a WHERE clause (placeholders for every value)."""
        terms = []
        for col, op, value in where:
            if op in _BINARY:
                terms.append(f"{self._q[col]} {op} {self._mark(value)}")
            elif op == "in":
                terms.append(f"{self._q[col]} IN ({', '.join('?' * len(value))})")
            elif op == "is null":
                terms.append(f"{self._q[col]} IS NULL")
            else:
                raise ValueError(f"unknown operator {op!r}")
        return " AND ".join(terms)

    def _where_params(self, where: Sequence[Condition], params: list[Any]) -> list[Any]:
        for col, op, value in where:
            if op == "LIKE":
                params.append(value)  # a pattern, not a column value
            elif op in _BINARY:
                params.append(self._value(col, value))
            elif op == "in":
                params.extend(self._param(col, v) for v in value)
        return params

    def update(
        self,
        values: dict[str, Any],
        where: Sequence[Condition],
        returning: Sequence[str] | None = None,
    ) -> tuple[str, list[Any]]:
        """UPDATE tasks SET ``values`` WHERE every condition holds, RETURNING the task (or
        just the ``returning`` columns)."""
        adds = tuple(
            "+" if isinstance(v, Add) else "now" if isinstance(v, DbNow) else ""
            for v in values.values()
        )
        key = ("update", tuple(values), adds, tuple((c, o, _now(v)) for c, o, v in where))
        key += (tuple(returning or ()),)
        key += tuple(len(v) for _, o, v in where if o == "in")
        sql = self._cache.get(key)
        if sql is None:
            self._check([*values, *(c for c, _, _ in where), *(returning or ())])
            sets = ", ".join(
                f"{self._q[c]} = {self._q[c]} + ?"
                if add == "+"
                else f"{self._q[c]} = {SQLITE_NOW if add else '?'}"
                for c, add in zip(values, adds, strict=True)
            )
            terms = self._where(where)
            back = (
                " RETURNING " + ", ".join(self._q[c] for c in returning)
                if returning
                else self._returning
            )
            sql = self._cache[key] = f"UPDATE {self._table} SET {sets} WHERE {terms}{back}"
        params = [v.n if isinstance(v, Add) else self._value(k, v) for k, v in values.items()]
        return sql, self._where_params(where, params)

    def select(
        self, where: Sequence[Condition], *, newest_first: bool = True
    ) -> tuple[str, list[Any]]:
        """SELECT the task columns WHERE every condition holds, by id."""
        key = ("select", tuple((c, o, _now(v)) for c, o, v in where), newest_first)
        key += tuple(len(v) for _, o, v in where if o == "in")
        sql = self._cache.get(key)
        if sql is None:
            self._check(c for c, _, _ in where)
            terms = self._where(where)
            cols = ", ".join(self._q[c] for c in self.columns)
            order = "DESC" if newest_first else "ASC"
            sql = f"SELECT {cols} FROM {self._table} WHERE {terms} ORDER BY {self._q['id']} {order}"
            self._cache[key] = sql
        return sql, self._where_params(where, [])


def _now(value: Any) -> bool:
    return isinstance(value, DbNow)


def hot_write(
    hot: HotSql,
    sql: str,
    params: list[Any],
    now: datetime,
    note: str | Callable[[Task], str] | None,
) -> RawWrite:
    """A raw write (run on the driver's thread) of one task statement RETURNING the row, plus
    its task_event; None when no row matched."""

    def write(conn: Any, events: list[Any]) -> Task | None:
        row = conn.execute(sql, params).fetchone()
        if row is None:
            return None
        task = Task(*hot.row(row))
        text = note(task) if callable(note) else note
        conn.execute(hot.event_sql, hot.event(task.id, now, task.status, text))
        events.append(_event_for(task, text, now))
        return task

    return write


async def read(engine: AsyncEngine, fn: Callable[[sqlite3.Connection], Any]) -> Any:
    """Run ``fn(sqlite3_connection)`` on a pooled read connection, on the driver's thread, in
    one hop (through SQLAlchemy a small SELECT is a BEGIN, an execute, a fetch and a rollback,
    each a hop, plus the statement's compile-cache lookup: about 1.4 ms against 0.3 ms)."""
    async with engine.connect() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        try:
            return await driver._execute(fn, driver._conn)
        except sqlite3.Error as exc:
            raise DBAPIError.instance(None, None, exc, sqlite3.Error) from exc


__all__ = ["Add", "DbNow", "HotSql", "hot_write", "read", "sql_value"]
