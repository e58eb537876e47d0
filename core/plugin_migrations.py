"""What the diagnostic commands know about plugins' migration branches without changing the
database: a pending revision that would fail (tried in a transaction that is rolled back),
branches whose plugin is gone (orphaned), and the tables a branch creates.

``frontdesk doctor`` and ``plugins list`` show a plugin whose migration fails as FAIL with the
revision and the error, before any call finds out; ``db current`` shows an orphaned branch;
``plugins uninstall`` says which tables stay.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect as sa_inspect
from sqlalchemy import text

from frontdesk.core.schema import branches, current
from frontdesk.migrations import CORE, MigrationFailed, upgrade_sync

if TYPE_CHECKING:
    from frontdesk.core.registry import Registry

VERSION_PREFIX = "alembic_version_"
_CREATE_TABLE = re.compile(r"create_table\(\s*['\"](\w+)['\"]")
_LOCK = 724508  # the key frontdesk.core.schema takes around a real upgrade


async def trial(url: str, registry: Registry, timeout: float = 10.0) -> list[MigrationFailed]:
    """Each loaded plugin branch that is behind its head, upgraded in a transaction that is
    then rolled back: the ones that fail, with revision and error. Nothing is written. A
    SQLite file that does not exist yet is not created: the trial runs on a scratch copy."""
    from frontdesk.db.engine import create_engine, parse_url, sqlite_tables

    wanted = [b for b in branches(registry) if b.name != CORE.name]
    if not wanted:
        return []
    parsed = parse_url(url)
    scratch = None
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database or ""
        if not Path(path).is_file():
            scratch = tempfile.TemporaryDirectory(prefix="frontdesk-trial-")
            url = f"sqlite+aiosqlite:///{scratch.name}/trial.db"
        else:
            tables = sqlite_tables(path)  # read-only: never switch a foreign file to WAL
            if tables is None or (tables and CORE.version_table not in tables):
                return []
    engine = create_engine(url, immediate=True)
    try:
        return await asyncio.wait_for(_try_each(engine, wanted), timeout)
    finally:
        await engine.dispose()
        if scratch is not None:
            scratch.cleanup()


async def _try_each(engine: Any, wanted: list[Any]) -> list[MigrationFailed]:
    async with engine.connect() as conn:
        now = await current(conn, [CORE, *wanted])
    faults = []
    for branch in wanted:
        if now.get(branch.name) == branch.head:
            continue
        async with engine.connect() as conn:
            transaction = await conn.begin()
            try:
                if engine.dialect.name == "postgresql":
                    await conn.execute(text(f"SELECT pg_advisory_xact_lock({_LOCK})"))
                if now.get(CORE.name) != CORE.head:
                    await conn.run_sync(upgrade_sync, CORE)
                await conn.run_sync(upgrade_sync, branch)
            except MigrationFailed as exc:
                if exc.branch == branch.name:  # core's own trouble is the database section's
                    faults.append(exc)
            finally:
                await transaction.rollback()
    return faults


async def version_tables(conn: Any) -> dict[str, str | None]:
    """Every plugin branch recorded in the database: branch name -> its revision."""

    def read(sync_conn: Any) -> dict[str, str | None]:
        found = {}
        for table in sa_inspect(sync_conn).get_table_names():
            if table.startswith(VERSION_PREFIX):
                revision = sync_conn.execute(text(f"SELECT version_num FROM {table}")).scalar()
                found[table[len(VERSION_PREFIX) :]] = revision
        return found

    return await conn.run_sync(read)


def created_tables(versions: Path) -> list[str]:
    """The tables a branch's revisions create (``op.create_table("name", ...)``), read from
    its files: what stays behind when its plugin is uninstalled."""
    names: list[str] = []
    for path in sorted(Path(versions).glob("*.py")):
        for name in _CREATE_TABLE.findall(path.read_text(encoding="utf-8")):
            if name not in names:
                names.append(name)
    return names


async def applied(url: str, folders: dict[str, Path]) -> list[tuple[str, str, list[str], Path]]:
    """(plugin, revision, its tables present, versions folder) for each plugin in ``folders``
    whose branch is applied in the database at ``url``; read only, nothing is created."""
    from frontdesk.db.engine import create_engine, parse_url

    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").is_file():
        return []
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            revisions = await version_tables(conn)
            present = set(await conn.run_sync(lambda c: sa_inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    return [
        (plugin, str(revisions[plugin]), [t for t in created_tables(path) if t in present], path)
        for plugin, path in folders.items()
        if revisions.get(plugin)
    ]
