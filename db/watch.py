"""A cheap wake-up when another connection (any process) may have committed a task change.

- SQLite: ``PRAGMA data_version`` on a private connection, read every ``interval`` seconds. It
  moves only when another connection commits, and costs a few microseconds, so an idle watch
  is close to free (the follow-up watcher in core/followups.py does the same).
- Postgres: ``LISTEN`` on ``CHANNEL``; the TaskStore's writer NOTIFYs once per transaction that
  changed a task (db/writer.py). A fallback wake every ``fallback`` seconds covers a listener
  connection that dropped (it is re-opened) and writers that do not NOTIFY.

A wake means "look": the caller reads what is new itself, so a spurious wake costs one read.
``wait`` says whether it saw a sign of a change (False: only the fallback interval passed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from typing import Any

from sqlalchemy.engine import make_url

from frontdesk.db.outage import OUTAGE

log = logging.getLogger("frontdesk.watch")

CHANNEL = "frontdesk_task_events"


class ChangeWatch:
    def __init__(self, url: str, *, interval: float = 0.1, fallback: float = 2.0) -> None:
        self.url = make_url(url)
        self.interval = interval
        self.fallback = fallback
        self.sqlite = self.url.get_backend_name() == "sqlite"
        self._version_conn: sqlite3.Connection | None = None
        self._version: int | None = None
        self._listener: Any = None  # asyncpg.Connection
        self._notified = asyncio.Event()
        self._listen_failing = False
        self.wakes = 0

    async def wait(self) -> bool:
        """Return once something may have changed (True) or the fallback interval passed."""
        if self.sqlite:
            changed = await self._wait_sqlite()
        else:
            changed = await self._wait_postgres()
        self.wakes += 1
        return changed

    # -- SQLite -----------------------------------------------------------------------------

    def _data_version(self) -> int | None:
        path = self.url.database or ""
        if path in ("", ":memory:"):
            return None  # a private database: nobody else can write it
        if self._version_conn is None:
            self._version_conn = sqlite3.connect(path, check_same_thread=False)
        return int(self._version_conn.execute("PRAGMA data_version").fetchone()[0])

    async def _wait_sqlite(self) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.fallback
        while True:
            await asyncio.sleep(self.interval)
            try:
                version = self._data_version()
            except sqlite3.Error:
                log.debug("data_version read failed", exc_info=True)
                version = None
            if version is None or version != self._version or loop.time() >= deadline:
                changed = version is None or version != self._version
                self._version = version
                return changed

    # -- Postgres ---------------------------------------------------------------------------

    async def _listen(self) -> None:
        import asyncpg

        u = self.url
        self._listener = await asyncpg.connect(
            host=u.host or "127.0.0.1",
            port=u.port or 5432,
            user=u.username,
            password=u.password,
            database=u.database,
            timeout=5,
        )
        await self._listener.add_listener(CHANNEL, lambda *_: self._notified.set())

    async def _wait_postgres(self) -> bool:
        if self._listener is None or self._listener.is_closed():
            self._listener = None
            try:
                await self._listen()
            except Exception as exc:
                # The outage itself is logged once per process (db/outage.py).
                if not OUTAGE.failed(exc) and not self._listen_failing:
                    log.warning("cannot LISTEN for task changes (%s); polling", exc)
                self._listen_failing = True
                await asyncio.sleep(self.fallback)
                return True
            self._listen_failing = False
            OUTAGE.ok()
            return True  # (re)connected: whatever happened meanwhile is read now
        try:
            await asyncio.wait_for(self._notified.wait(), self.fallback)
        except asyncio.TimeoutError:
            return False
        finally:
            self._notified.clear()
        return True

    async def aclose(self) -> None:
        if self._version_conn is not None:
            self._version_conn.close()
            self._version_conn = None
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close(timeout=2)
            self._listener = None
