"""TaskStore's record of calls: who called, when, and the handoffs between desks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from frontdesk.db.models import Call, utcnow
from frontdesk.db.writer import GroupWriter

calls_t = Call.__table__


class CallLog:
    read_engine: AsyncEngine
    _writer: GroupWriter

    async def call_started(self, session_id: str, caller: str) -> None:
        values = {
            "session_id": session_id,
            "caller": caller,
            "started_at": utcnow(),
            "handoffs": [],
        }

        async def write(conn: AsyncConnection, events: list[Any]) -> None:
            await conn.execute(insert(calls_t), values)

        await self._writer.run(write)

    async def call_handoff(self, session_id: str, from_: str | None, to: str) -> None:
        entry = {"from": from_, "to": to, "at": utcnow().isoformat()}

        async def write(conn: AsyncConnection, events: list[Any]) -> None:
            current = (
                await conn.execute(
                    select(calls_t.c.handoffs).where(calls_t.c.session_id == session_id)
                )
            ).scalar_one_or_none()
            if current is not None:
                await conn.execute(
                    update(calls_t)
                    .where(calls_t.c.session_id == session_id)
                    .values(handoffs=[*current, entry])
                )

        await self._writer.run(write)

    async def call_ended(self, session_id: str) -> None:
        stmt = (
            update(calls_t)
            .where(calls_t.c.session_id == session_id, calls_t.c.ended_at.is_(None))
            .values(ended_at=utcnow())
        )

        async def write(conn: AsyncConnection, events: list[Any]) -> None:
            await conn.execute(stmt)

        await self._writer.run(write)

    async def get_call(self, session_id: str) -> dict[str, Any] | None:
        async with self.read_engine.connect() as conn:
            row = (
                await conn.execute(select(calls_t).where(calls_t.c.session_id == session_id))
            ).one_or_none()
        return dict(row._mapping) if row else None
