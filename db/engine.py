"""The async engine: SQLite (WAL, busy timeout, foreign keys) by default, Postgres by URL.

The schema is frontdesk.core.schema's business (core and every plugin's migrations).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import stamina
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from frontdesk.db import walcare
from frontdesk.db.errors import ConfigError
from frontdesk.db.outage import OUTAGE

BUSY_TIMEOUT_MS = 10_000
# How long a Postgres caller waits for a connection, both for one from the pool (all in use)
# and for a server slot (``too many connections``, or the server starting up, retried with
# backoff), before its operation fails as "the database is not answering" (the caller's
# STORE_DOWN sentence, the console's 503). A refused connection (server down) is not waited
# for: that is an outage, and callers hear so at once.
CONNECT_WAIT_ENV = "FRONTDESK_DB_CONNECT_WAIT_SECONDS"
CONNECT_WAIT_SECONDS = 10.0


def connect_wait() -> float:
    """``FRONTDESK_DB_CONNECT_WAIT_SECONDS`` (default 10; tests shorten it)."""
    try:
        return max(0.0, float(os.environ.get(CONNECT_WAIT_ENV) or CONNECT_WAIT_SECONDS))
    except ValueError:
        raise ConfigError(f"{CONNECT_WAIT_ENV} must be a number of seconds") from None


def _no_slot_now(exc: Exception) -> bool:
    """The server is up but cannot take this connection yet: its slots are full (53300), or
    it is starting up or shutting down (57P03): worth waiting for, within the bound."""
    return getattr(exc, "sqlstate", None) in ("53300", "57P03")


def patient_connect(wait: float) -> Callable[..., Awaitable[Any]]:
    """asyncpg's ``connect``, retried with backoff for ``wait`` seconds while the server has
    no slot for it (SQLAlchemy passes it its connect arguments: ``async_creator_fn``)."""

    async def connect(*args: Any, **kwargs: Any) -> Any:
        import asyncpg

        async for attempt in stamina.retry_context(
            on=_no_slot_now, attempts=None, timeout=wait, wait_initial=0.05, wait_max=1.0
        ):
            with attempt:
                try:
                    return await asyncpg.connect(*args, **kwargs)
                except Exception as exc:
                    # A refused connect is no DBAPI error, so SQLAlchemy's handle_error never
                    # sees it: the process's outage log is told here (db/outage.py).
                    if not _no_slot_now(exc):
                        OUTAGE.failed(exc)
                    raise
        raise AssertionError("unreachable: the last attempt re-raises")

    return connect


def mask_url(url: str) -> str:
    """The database URL with its password (and any secret-looking query value) hidden: the
    only form of it that goes into messages and logs."""
    try:
        parsed = make_url(url)
    except Exception:
        return "<unparseable URL>"
    query = {
        k: ("***" if any(s in k.lower() for s in ("pass", "secret", "token", "key")) else v)
        for k, v in parsed.query.items()
    }
    return parsed.set(query=query).render_as_string(hide_password=True)


def parse_url(url: str) -> URL:
    """A database URL with an async driver, or a ``ConfigError`` that says what is wrong."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            "malformed database URL; expected e.g. sqlite+aiosqlite:///frontdesk.db "
            "or postgresql+asyncpg://user@host/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if is_memory(parsed):
            raise ConfigError(
                f"{url[:100]} is an in-memory SQLite database: each connection would see its "
                "own empty copy and it is gone when the command ends; use a file, e.g. "
                "sqlite+aiosqlite:///frontdesk.db"
            )
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    raise ConfigError(
        f"unsupported database {backend!r} in {mask_url(url)}; use sqlite or postgresql"
    )


def is_memory(parsed: URL) -> bool:
    """``sqlite://``, ``sqlite:///``, ``sqlite:///:memory:`` and ``file:...?mode=memory``."""
    database = parsed.database or ""
    return (
        database in ("", ":memory:")
        or database.startswith("file::memory:")
        or "mode=memory" in database
        or parsed.query.get("mode") == "memory"
    )


def sqlite_tables(path: str) -> set[str] | None:
    """The table names of an SQLite file, read without changing it (no journal switch, no
    -wal or -shm file); None if it is not an SQLite database."""
    import sqlite3
    from pathlib import Path

    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return {r[0] for r in rows}


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def create_engine(url: str, *, immediate: bool = False) -> AsyncEngine:
    """An engine for ``url``; ``immediate`` makes every SQLite transaction take the write lock
    up front, which is what a writer wants (a deferred upgrade can fail with SQLITE_BUSY
    without waiting on the busy timeout)."""
    parsed = parse_url(url)
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        # One connection per engine: SQLite serialises writers anyway, and a pool of them only
        # turns into lock waits (DESIGN.md measured 3-4 s waits with the default pool).
        kwargs.update(pool_size=1, max_overflow=0, pool_timeout=60)
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000}
    else:
        wait = connect_wait()
        kwargs.update(pool_size=5, max_overflow=5, pool_pre_ping=True, pool_timeout=wait)
        kwargs["connect_args"] = {"async_creator_fn": patient_connect(wait)}
    engine = create_async_engine(parsed, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        _configure_sqlite(engine, immediate=immediate)
    return engine


def _configure_sqlite(engine: AsyncEngine, *, immediate: bool) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN is ours to issue.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        # A small WAL, so a nearly full disk recovers once space is freed (db/walcare.py).
        walcare.apply_pragmas(cur)
        cur.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


async def settle_driver_threads(timeout: float = 1.0) -> None:
    """aiosqlite stops a failed connection's thread by posting back to the event loop; if a
    CLI closes its loop first, that thread prints a traceback under our one-line error."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline and any(
        "_connection_worker_thread" in t.name for t in threading.enumerate()
    ):
        await asyncio.sleep(0.01)


def sqlite_path(url: str) -> str | None:
    """The database file of an SQLite URL, None for Postgres (or a URL that is not a file)."""
    try:
        parsed = parse_url(url)
    except ConfigError:
        return None
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or is_memory(parsed) or database.startswith("file:"):
        return None
    return database
