"""The schema: core's Alembic branch and every loaded plugin's, brought to their heads.

``open_store`` is how every process that writes opens the TaskStore: a fresh database needs no
setup step. Read-only commands open it without ``upgrade`` and never create or migrate it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import stamina
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from frontdesk.db.store import TaskStore
from frontdesk.db.writer import is_transient
from frontdesk.migrations import CORE, Branch, MigrationFailed, current_sync, upgrade_sync

if TYPE_CHECKING:
    from frontdesk.core.host import Registry

# Two workers starting together must not both run a migration (Postgres advisory lock key).
_MIGRATION_LOCK = 724508


def branches(registry: Registry | None = None) -> list[Branch]:
    """Core's branch, then each loaded plugin's that registered migrations."""
    found = [CORE]
    if registry is not None:
        found += [Branch(name, path) for name, path in registry.migrations.items()]
    return found


async def current(conn: AsyncConnection, wanted: list[Branch]) -> dict[str, str | None]:
    """Each branch's revision in the database (None where it has none)."""

    def read(sync_conn: Any) -> dict[str, str | None]:
        return {b.name: current_sync(sync_conn, b) for b in wanted}

    return await conn.run_sync(read)


async def upgrade(store: TaskStore, wanted: list[Branch]) -> list[MigrationFailed]:
    """Bring every branch to its head; a cheap read when all are. Each branch upgrades in its
    own transaction, core's first: a plugin's branch that fails is rolled back whole and
    returned, and every other branch still migrates (core's failure raises). Processes that
    open a fresh SQLite file together can meet its first writer's locks (switching to WAL,
    migrating) where the busy timeout does not apply, so "locked" is retried."""
    async with store.read_engine.connect() as conn:
        now = await current(conn, wanted)
    faults: list[MigrationFailed] = []
    for branch in [b for b in wanted if now.get(b.name) != b.head]:
        try:
            await _upgrade_branch(store, branch)
        except MigrationFailed as exc:
            if branch.name == CORE.name:
                # Nothing runs without core's tables: the database's own error, which the
                # store reports as one "cannot open database" line.
                raise (exc.__cause__ or exc) from None
            faults.append(exc)
    return faults


async def _upgrade_branch(store: TaskStore, branch: Branch) -> None:
    async for attempt in stamina.retry_context(
        on=is_transient, attempts=10, timeout=60.0, wait_initial=0.05, wait_max=2.0
    ):
        with attempt:
            async with store.write_engine.begin() as conn:
                if store.dialect == "postgresql":
                    await conn.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
                try:
                    await conn.run_sync(upgrade_sync, branch)
                except MigrationFailed as exc:
                    if is_transient(exc.__cause__):
                        raise exc.__cause__ from None  # "locked": retried as a whole
                    raise


def withdraw_failed(registry: Registry, faults: list[MigrationFailed]) -> None:
    """A plugin whose migration failed is withdrawn: its desk and tools would only fail on
    tables that are not there. Named with the revision and the error, as doctor shows it."""
    for fault in faults:
        registry.fail(fault.branch, str(fault))


async def open_store(url: str, registry: Registry | None = None) -> TaskStore:
    """A TaskStore on ``url`` with core's schema and the loaded plugins' at their heads.

    A plugin whose branch fails to migrate is withdrawn from ``registry`` (its desk and tools),
    and the store opens for everything else. Without a ``registry`` the default plugins are
    loaded to find their migrations."""
    if registry is None:
        from frontdesk.core import host

        registry = host.load()
    wanted = branches(registry)

    async def prepare(store: TaskStore) -> None:
        withdraw_failed(registry, await upgrade(store, wanted))
        # DBOS's tables (core/jobs.py): a job can then be enqueued before any runner starts.
        from frontdesk.core.jobs import migrate

        await asyncio.to_thread(migrate, url)

    return await TaskStore.open(url, prepare=prepare)


async def open_existing(url: str) -> TaskStore:
    """A TaskStore on a frontdesk database that already exists, for commands that only read
    (or change a row): it never creates a file, a table or a migration. A missing or foreign
    database is one ``FrontdeskError`` saying how to create one."""
    from pathlib import Path

    from frontdesk.core.errors import FrontdeskError
    from frontdesk.db.engine import mask_url, parse_url, sqlite_tables

    parsed = parse_url(url)
    hint = f"`frontdesk db upgrade --db {mask_url(url)}` creates one"
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database or ""
        if path and path != ":memory:" and not Path(path).is_file():
            raise FrontdeskError(f"no frontdesk database at {path}; {hint}")
        # Looked at read-only first: connecting as the store does would switch a foreign
        # file's journal to WAL and leave -wal/-shm files beside it.
        tables = sqlite_tables(path)
        if tables is None:
            raise FrontdeskError(f"{path} is not an SQLite database")
        if not tables:
            raise FrontdeskError(f"no frontdesk database at {path} (the file is empty); {hint}")
        if CORE.version_table not in tables:
            raise FrontdeskError(
                f"{path} is not a frontdesk database (it holds other tables); "
                "point --db at a frontdesk database or at a new file"
            )

    async def require(store: TaskStore) -> None:
        async with store.read_engine.connect() as conn:
            revision = (await current(conn, [CORE]))[CORE.name]
        if revision is None:
            raise FrontdeskError(f"no frontdesk database at {mask_url(url)}; {hint}")
        if revision != CORE.head:
            raise FrontdeskError(
                f"database {mask_url(url)} is at schema {revision}, this frontdesk needs "
                f"{CORE.head}: run `frontdesk db upgrade`"
            )

    return await TaskStore.open(url, prepare=require)
