"""Models and migrations agree, and the schema upgrades and downgrades cleanly, on SQLite and
Postgres."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from frontdesk.core.schema import open_store
from frontdesk.db.engine import create_engine
from frontdesk.db.models import Base
from frontdesk.migrations import downgrade_sync, head_revision, upgrade_sync

pytestmark = pytest.mark.backends("sqlite", "postgres")


async def _diff(url: str) -> list:
    engine = create_engine(url, immediate=True)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_sync)

            def compare(sync_conn):
                ctx = MigrationContext.configure(sync_conn, opts={"compare_type": True})
                return compare_metadata(ctx, Base.metadata)

            return await conn.run_sync(compare)
    finally:
        await engine.dispose()


async def test_models_match_migrations(db_url):
    assert await _diff(db_url) == []


async def test_upgrade_downgrade_roundtrip(db_url):
    engine = create_engine(db_url, immediate=True)

    def current(sync_conn):
        return MigrationContext.configure(sync_conn).get_current_revision()

    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_sync)
            assert await conn.run_sync(current) == head_revision()
        async with engine.begin() as conn:
            await conn.run_sync(downgrade_sync, "base")
            assert await conn.run_sync(current) is None
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_sync)
            assert await conn.run_sync(current) == head_revision()
    finally:
        await engine.dispose()


async def test_schema_created_on_first_use(db_url):

    url = db_url
    store = await open_store(url)
    try:
        task = await store.create(caller="c", tool="t", pattern="background")
        assert (await store.get(task.id)).status == "queued"
    finally:
        await store.close()
    again = await open_store(url)  # already at head: opens without migrating
    await again.close()


def test_head_revision_matches_alembic():
    from alembic.script import ScriptDirectory

    from frontdesk.migrations import alembic_config

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
