"""One serialized writer per process, with group commit.

Every write is a small coroutine run on a connection. Writes that arrive while a transaction is
in flight are batched into the next one, so 200 concurrent transitions cost a handful of
commits, not 200, and SQLite never sees two writers from this process. A batch that fails is
replayed one write at a time so one bad write cannot sink its neighbours. "database is locked"
(another process holding the lock past the busy timeout) is retried with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import stamina
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

Write = Callable[[AsyncConnection, list[Any]], Awaitable[Any]]


def _is_transient(exc: Exception) -> bool:
    if not isinstance(exc, OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text or "could not serialize" in text


class GroupWriter:
    def __init__(self, engine: AsyncEngine, on_commit: Callable[[list[Any]], None]) -> None:
        self._engine = engine
        self._on_commit = on_commit
        self._pending: list[tuple[Write, asyncio.Future[Any]]] = []
        self._task: asyncio.Task[None] | None = None
        self.commits = 0

    async def run(self, write: Write) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((write, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="frontdesk.store.writer")
        return await asyncio.shield(fut)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[Write, asyncio.Future[Any]]]) -> None:
        events: list[Any] = []
        try:
            results = await self._transaction([w for w, _ in batch], events)
        except Exception as exc:
            if len(batch) == 1:
                if not batch[0][1].done():
                    batch[0][1].set_exception(exc)
                return
            for item in batch:
                await self._commit([item])
            return
        for (_, fut), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)
        if events:
            self._on_commit(events)

    @stamina.retry(on=_is_transient, attempts=8, timeout=30.0, wait_initial=0.02, wait_max=1.0)
    async def _transaction(self, writes: list[Write], events: list[Any]) -> list[Any]:
        del events[:]
        async with self._engine.begin() as conn:
            self.commits += 1
            return [await write(conn, events) for write in writes]

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            await self._task
