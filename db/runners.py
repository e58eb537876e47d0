"""TaskStore's runner registry: which background runners exist and whether they still beat.

A runner (core/runner.py) takes an executor id here (``claim_runner``), bumps its ``beats``
(``beat``) every few seconds and says when it stops (``runner_stopped``). Other runners read
the rows (``runners``) and take over one whose beats stood still for the bound
(``runner_taken_over``). Every change is compare-and-set, so two runners never both take the
same id, and a runner that was only slow keeps its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update

from frontdesk.db.models import Runner as RunnerRow
from frontdesk.db.models import Task as TaskRow
from frontdesk.db.models import utcnow

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from frontdesk.db.writer import GroupWriter

runners_t = RunnerRow.__table__

RUNNING, STOPPED, GONE = "running", "stopped", "gone"


@dataclass(frozen=True)
class RunnerInfo:
    executor_id: str
    host: str
    pid: int
    version: str
    state: str
    beats: int


class Runners:
    read_engine: AsyncEngine
    _writer: GroupWriter

    async def runners(self) -> list[RunnerInfo]:
        stmt = select(runners_t).order_by(runners_t.c.executor_id)
        async with self.read_engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [RunnerInfo(r.executor_id, r.host, r.pid, r.version, r.state, r.beats) for r in rows]

    async def claim_runner(
        self, executor_id: str, host: str, pid: int, version: str, *, free: Any = None
    ) -> bool:
        """Take ``executor_id`` for this process: a new id, or one whose row ``free(row)``
        says is no longer held (its process is gone). Compare-and-set, so of two processes
        claiming one id at once, one wins."""

        async def write(conn: AsyncConnection, events: list[Any]) -> bool:
            row = (
                await conn.execute(select(runners_t).where(runners_t.c.executor_id == executor_id))
            ).one_or_none()
            values = dict(host=host, pid=pid, version=version, state=RUNNING, started_at=utcnow())
            if row is None:
                await conn.execute(
                    insert(runners_t).values(executor_id=executor_id, beats=0, **values)
                )
                return True
            if free is not None and not free(row):
                return False
            done = await conn.execute(
                update(runners_t)
                .where(
                    runners_t.c.executor_id == executor_id,
                    runners_t.c.pid == row.pid,
                    runners_t.c.beats == row.beats,
                )
                .values(beats=runners_t.c.beats + 1, **values)
            )
            return done.rowcount == 1

        return await self._writer.run(write)

    async def beat(self, executor_id: str) -> bool:
        """One heartbeat; False if this id was taken over meanwhile (it is another's now)."""
        stmt = (
            update(runners_t)
            .where(runners_t.c.executor_id == executor_id, runners_t.c.state == RUNNING)
            .values(beats=runners_t.c.beats + 1)
        )

        async def write(conn: AsyncConnection, events: list[Any]) -> bool:
            return (await conn.execute(stmt)).rowcount == 1

        return await self._writer.run(write)

    async def revive_runner(self, executor_id: str, pid: int) -> bool:
        """Take this process's id back after another runner judged it dead (its heartbeat
        stood still for the bound): False if another process holds the id now."""
        stmt = (
            update(runners_t)
            .where(runners_t.c.executor_id == executor_id, runners_t.c.pid == pid)
            .values(state=RUNNING, beats=runners_t.c.beats + 1)
        )

        async def write(conn: AsyncConnection, events: list[Any]) -> bool:
            return (await conn.execute(stmt)).rowcount == 1

        return await self._writer.run(write)

    async def mark_runner(
        self, executor_id: str, state: str, *, beats: int | None = None, pid: int | None = None
    ) -> bool:
        """Set a runner's state; with ``beats``/``pid``, only if they are still those (a
        runner that beat after the sweep, or a new process on the id, keeps it)."""
        stmt = update(runners_t).where(runners_t.c.executor_id == executor_id)
        if beats is not None:
            stmt = stmt.where(runners_t.c.beats == beats)
        if pid is not None:
            stmt = stmt.where(runners_t.c.pid == pid)
        stmt = stmt.values(state=state)

        async def write(conn: AsyncConnection, events: list[Any]) -> bool:
            return (await conn.execute(stmt)).rowcount == 1

        return await self._writer.run(write)

    async def task_statuses(self, ids: list[int]) -> dict[int, str]:
        """The status of each of these tasks (the runner watches its jobs for a cancel)."""
        if not ids:
            return {}
        tasks = TaskRow.__table__
        stmt = select(tasks.c.id, tasks.c.status).where(tasks.c.id.in_(ids))
        async with self.read_engine.connect() as conn:
            return {r.id: r.status for r in (await conn.execute(stmt)).all()}
