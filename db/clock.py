"""The database's own clock, read once: what "now" means for idempotency windows.

Every process that talks to one database agrees on its clock (Postgres ``clock_timestamp()``;
on SQLite, the one machine's clock as SQLite reads it), whereas two processes' wall clocks may
differ by an hour (a bad NTP step, a container's clock). agents/keys.py reads this once and
then counts monotonic time from it, so a wall-clock step in the process changes nothing.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

_SQL = {
    "postgresql": "SELECT clock_timestamp()",
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
}


async def database_now(engine: AsyncEngine) -> datetime:
    """The database's clock now, as an aware UTC datetime."""
    async with engine.connect() as conn:
        value = (
            await conn.execute(text(_SQL.get(conn.dialect.name, _SQL["postgresql"])))
        ).scalar_one()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)
