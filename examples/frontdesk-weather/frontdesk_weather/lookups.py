"""The plugin's own table, ``weather_lookups``, through ``ctx.database``.

The table is created by this package's migration (``migrations/weather_0001_lookups.py``,
registered with ``register_migrations``); this module only describes it for SQLAlchemy Core
queries. Writes go through ``ctx.database.write`` so they share frontdesk's one serialized
writer; reads borrow a connection with ``ctx.database.read()``.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

metadata = sa.MetaData()

weather_lookups = sa.Table(
    "weather_lookups",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("caller", sa.String(200), nullable=False),
    sa.Column("city", sa.String(100), nullable=False),
    sa.Column("units", sa.String(10), nullable=False),
    sa.Column("summary", sa.String(300), nullable=False),
    sa.Column("looked_up_at", sa.Float, nullable=False),
)


async def record(database: Any, *, caller: str, city: str, units: str, summary: str) -> int:
    """Store one lookup; its row id."""

    async def insert(conn: AsyncConnection) -> int:
        result = await conn.execute(
            weather_lookups.insert().values(
                caller=caller, city=city, units=units, summary=summary, looked_up_at=time.time()
            )
        )
        return int(result.inserted_primary_key[0])

    return int(await database.write(insert))


async def recent(database: Any, *, city: str, units: str, max_age_seconds: float) -> str | None:
    """The newest summary for this city and units looked up within ``max_age_seconds``."""
    if max_age_seconds <= 0:
        return None
    query = (
        sa.select(weather_lookups.c.summary)
        .where(
            weather_lookups.c.city == city,
            weather_lookups.c.units == units,
            weather_lookups.c.looked_up_at >= time.time() - max_age_seconds,
        )
        .order_by(weather_lookups.c.looked_up_at.desc())
        .limit(1)
    )
    async with database.read() as conn:
        return (await conn.execute(query)).scalar()


async def for_caller(database: Any, caller: str, limit: int = 5) -> list[str]:
    """A caller's latest lookups, newest first."""
    query = (
        sa.select(weather_lookups.c.summary)
        .where(weather_lookups.c.caller == caller)
        .order_by(weather_lookups.c.id.desc())
        .limit(limit)
    )
    async with database.read() as conn:
        return list((await conn.execute(query)).scalars())
