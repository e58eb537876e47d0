"""One serialized writer per process, with group commit.

Every write is a small coroutine run on a connection (or, for the TaskStore's hot statements on
SQLite, a plain function run on the driver's thread; see ``GroupWriter``). Writes that arrive while a transaction is
in flight are batched into the next one, so 200 concurrent transitions cost a handful of
commits, not 200, and SQLite never sees two writers from this process. A batch that fails is
replayed one write at a time so one bad write cannot sink its neighbours. "database is locked"
(another process holding the lock past the busy timeout) is retried with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import stamina
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from frontdesk.db import walcare
from frontdesk.db.engine import BUSY_TIMEOUT_MS
from frontdesk.db.outage import store_down

Write = Callable[[AsyncConnection, list[Any]], Awaitable[Any]]
# Runs on the aiosqlite thread with the raw sqlite3 connection, inside the group's transaction.
RawWrite = Callable[[sqlite3.Connection, list[Any]], Any]
_Item = tuple[Any, bool, "asyncio.Future[Any]"]  # (write, is raw, its caller's future)

# Idle seconds before the writer gives its SQLite connection back to the pool (another user of
# the write engine, such as ensure_schema, waits at most this long for it).
LINGER_SECONDS = 0.25

# Postgres errors after which the whole transaction may simply be run again: serialization
# failure, deadlock detected, lock not available. asyncpg surfaces them as a generic DBAPIError,
# not an OperationalError, so they are matched by SQLSTATE.
_RETRY_SQLSTATES = frozenset({"40001", "40P01", "55P03"})


def is_transient(exc: Exception) -> bool:
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        # A dropped connection is not retried: the commit may have landed before the drop.
        return False
    orig = exc.orig
    if getattr(orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    if not isinstance(exc, OperationalError):
        return False
    text = str(orig).lower()
    return "locked" in text or "busy" in text or "could not serialize" in text


class GroupWriter:
    """Runs writes one transaction at a time, batching whatever queued up meanwhile.

    Two kinds of write share the queue and the transactions:
    - ``run(write)``: ``await write(conn, events)`` on a SQLAlchemy ``AsyncConnection``
      (plugins' own tables, e.g. the billing ledger; and every write on Postgres);
    - ``run_raw(write)``: ``write(sqlite3_connection, events)``, a plain function run on the
      aiosqlite driver's own thread. A batch made only of these (the TaskStore's hot
      statements) is BEGIN, every write and COMMIT in a single thread hop, which is what
      makes a state change cheap on the event loop (docs/performance.md).

    On SQLite the writer keeps its connection checked out while writes keep coming, and gives
    it back to the pool after ``linger`` idle seconds: a pool checkout and return costs about
    as much as a whole state change.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        on_commit: Callable[[list[Any]], None],
        *,
        linger: float = LINGER_SECONDS,
        notify: str | None = None,
    ) -> None:
        self._engine = engine
        # A statement run at the end of each transaction that produced events (Postgres NOTIFY:
        # delivered at commit, once per transaction however many events it holds).
        self._notify_sql = notify
        self._on_commit = on_commit
        self._pending: list[_Item] = []
        self._task: asyncio.Task[None] | None = None
        self._conn: AsyncConnection | None = None
        self._driver: Any = None  # the aiosqlite.Connection beneath _conn
        self._wake: asyncio.Future[bool] | None = None
        self._closing = False
        self.linger = linger
        self.commits = 0
        # Called before every transaction; raises to refuse it (db/fileguard.py: the database's
        # files were deleted or replaced, so nothing more may be written into them).
        self.guard: Callable[[], None] | None = None
        # Something was written (or a write failed) since the WAL was last truncated.
        self._checkpoint_due = False
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._wal = f"{database}-wal" if database else None
        self.checkpoints = 0
        # One hop per batch needs aiosqlite's way of running a function on its thread.
        self.raw = (
            engine.dialect.name == "sqlite"
            and engine.dialect.driver == "aiosqlite"
            and callable(getattr(_aiosqlite_connection(), "_execute", None))
        )

    async def run(self, write: Write) -> Any:
        return await self._submit(write, False)

    async def run_raw(self, write: RawWrite) -> Any:
        """Run ``write(conn, events)`` on the driver's thread, in the next group commit.
        Only where ``self.raw`` is true (SQLite through aiosqlite)."""
        if not self.raw:
            raise RuntimeError("raw writes need SQLite through aiosqlite")
        return await self._submit(write, True)

    async def _submit(self, write: Any, raw: bool) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((write, raw, fut))
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(True)  # the drain is lingering with the connection: go on
        elif self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="frontdesk.store.writer")
        # A caller cancelled meanwhile cancels only its own future: the write stays in its batch
        # and the batch commits for everyone (results are only set on futures not done). Not
        # shielded, because a shield costs every write one more trip round the event loop.
        return await fut

    async def _drain(self) -> None:
        batch: list[_Item] = []
        try:
            while True:
                try:
                    while True:
                        if self._pending:
                            batch, self._pending = self._pending, []
                            await self._commit(batch)
                            batch = []
                        elif not await self._linger():
                            await self._idle()
                            if not self._pending:
                                break
                finally:
                    await self._release()
                # A write may have arrived while the connection was being given back.
                if not self._pending:
                    return
        except BaseException as exc:  # cancelled (loop shutting down): nobody may hang
            for _, _, fut in [*batch, *self._pending]:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            self._pending = []
            raise

    async def _linger(self) -> bool:
        """Wait up to ``linger`` seconds for another write; False when it is time to let the
        connection go."""
        if self._conn is None or self._closing or self.linger <= 0:
            return False
        loop = asyncio.get_running_loop()
        wake = self._wake = loop.create_future()
        timer = loop.call_later(self.linger, _resolve, wake, False)
        try:
            return await wake
        finally:
            timer.cancel()
            self._wake = None

    async def _idle(self) -> None:
        """The writer has nothing to do: empty a WAL that holds more than a few commits
        (``wal_checkpoint(TRUNCATE)``), so its file takes next to no disk space between bursts
        (db/walcare.py). Writes that arrive meanwhile wait for it: a checkpoint of a WAL kept
        near 512 KB takes a few milliseconds."""
        if self._checkpoint_due and walcare.wal_bytes(self._wal) >= walcare.IDLE_TRUNCATE_BYTES:
            await self._truncate()

    async def _truncate(self) -> None:
        if not (self.raw and self._conn is not None and self._driver is not None):
            return
        self._checkpoint_due = False
        try:
            done = await self._hop(walcare.truncate_checkpoint, BUSY_TIMEOUT_MS)
        except Exception:  # the connection is gone: the next one's idle moment tries again
            done = None
        if done is None or done[0]:
            self._checkpoint_due = True  # busy or failed: try again at the next idle moment
        else:
            self.checkpoints += 1

    async def _release(self) -> None:
        conn, self._conn, self._driver = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _commit(self, batch: list[_Item]) -> None:
        events: list[Any] = []
        try:
            results = await self._transaction(batch, events)
        except Exception as exc:
            if len(batch) == 1 or store_down(exc):
                # A database that is not answering fails every write of the batch alike:
                # replaying them one at a time would make the last caller wait out the
                # connect bound once per write before it (50 callers: 50 bounds).
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                return
            for item in batch:
                await self._commit([item])
            return
        for (_, _, fut), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)
        if events:
            self._on_commit(events)

    async def _transaction(self, batch: list[_Item], events: list[Any]) -> list[Any]:
        # The first attempt goes straight in; stamina's bookkeeping is only paid on a retry.
        try:
            return await self._attempt(batch, events)
        except Exception as exc:
            if not is_transient(exc):
                raise
        return await self._retry(batch, events)

    @stamina.retry(on=is_transient, attempts=7, timeout=30.0, wait_initial=0.02, wait_max=1.0)
    async def _retry(self, batch: list[_Item], events: list[Any]) -> list[Any]:
        return await self._attempt(batch, events)

    async def _attempt(self, batch: list[_Item], events: list[Any]) -> list[Any]:
        del events[:]
        if self.guard is not None:
            self.guard()
        self.commits += 1
        self._checkpoint_due = True
        if not self.raw:
            async with self._engine.begin() as conn:
                results = [await write(conn, events) for write, _, _ in batch]
                if events and self._notify_sql is not None:
                    await conn.exec_driver_sql(self._notify_sql)
                return results
        try:
            if self._conn is None:
                self._conn = await self._engine.connect()
                self._driver = (await self._conn.get_raw_connection()).driver_connection
            if all(raw for _, raw, _ in batch):
                return await self._hop(_raw_transaction, [w for w, _, _ in batch], events)
            async with self._conn.begin():  # BEGIN IMMEDIATE (db/engine.py)
                return [
                    await self._hop(write, events) if raw else await write(self._conn, events)
                    for write, raw, _ in batch
                ]
        except BaseException as exc:
            if isinstance(exc, Exception) and walcare.is_disk_full(exc):
                # What the failed transaction appended to the WAL holds disk space: a TRUNCATE
                # checkpoint gives it back (if the database file can take the pages).
                await self._truncate()
            # The connection's state is unknown after a failure; the pool rolls back whatever
            # is left open, and the next batch checks out a fresh one.
            await self._release()
            raise

    async def _hop(self, fn: Callable[..., Any], *args: Any) -> Any:
        driver = self._driver
        try:
            return await driver._execute(fn, driver._conn, *args)
        except sqlite3.Error as exc:
            # Wrapped as SQLAlchemy wraps it, so callers and is_transient see one error type
            # (IntegrityError, OperationalError "database is locked", ...) on either path.
            raise DBAPIError.instance(None, None, exc, sqlite3.Error) from exc

    async def aclose(self) -> None:
        self._closing = True
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(False)
        if self._task is not None and not self._task.done():
            await self._task
        self._closing = False


def _raw_transaction(
    conn: sqlite3.Connection, writes: list[RawWrite], events: list[Any]
) -> list[Any]:
    """One group commit on the driver's thread (the connection is in autocommit mode, so the
    transaction is ours to open and close)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        results = [write(conn, events) for write in writes]
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return results


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


def _aiosqlite_connection() -> type | None:
    try:
        import aiosqlite
    except ImportError:
        return None
    return aiosqlite.Connection
