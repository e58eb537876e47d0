"""``frontdesk db``: Alembic upgrade, current and downgrade, for core's branch and every loaded
plugin's (each keeps its own version table; see migrations/__init__.py)."""

from __future__ import annotations

from typing import Any

import typer

from frontdesk.agents.programs.exits import fail, run_async
from frontdesk.core.errors import FrontdeskError
from frontdesk.core.settings import load_settings

app = typer.Typer(
    help="Database schema (Alembic): core and every plugin's branch.", no_args_is_help=True
)

DbOption = typer.Option(None, "--db", help="Database URL (default: FRONTDESK_DATABASE_URL).")
BranchOption = typer.Option(
    None, "--branch", help="Only this branch: frontdesk (core) or a plugin's name."
)


async def _with_conn(url: str, fn: Any, *args: Any) -> Any:
    from frontdesk.core.errors import FrontdeskError
    from frontdesk.db.engine import create_engine, mask_url, settle_driver_threads
    from frontdesk.migrations import MigrationFailed

    engine = create_engine(url, immediate=True)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(fn, *args)
    except Exception as exc:
        if isinstance(exc, FrontdeskError | MigrationFailed):
            raise
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise FrontdeskError(f"database {mask_url(url)}: {reason}") from None
    finally:
        await engine.dispose()
        await settle_driver_threads()


def _branches(branch: str | None, registry: Any = None) -> list[Any]:
    from frontdesk.core import host
    from frontdesk.core.schema import branches

    found = branches(registry or host.load())
    if branch is None:
        return found
    chosen = [b for b in found if b.name == branch]
    if not chosen:
        names = ", ".join(b.name for b in found)
        raise fail(f"no migration branch {branch!r}; loaded branches: {names}")
    return chosen


def _url(db: str | None) -> str:
    return db or load_settings().database_url


def _existing(url: str) -> str:
    """``url``, if its SQLite file exists: reading or downgrading must not create one."""
    from pathlib import Path

    from frontdesk.db.engine import mask_url, parse_url, sqlite_tables

    try:
        parsed = parse_url(url)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    path = parsed.database or ""
    if parsed.get_backend_name() != "sqlite":
        return url
    if not Path(path).is_file():
        raise fail(
            f"no frontdesk database at {path}; `frontdesk db upgrade --db {mask_url(url)}` creates one"
        )
    tables = sqlite_tables(path)  # read-only: no journal switch on another application's file
    if tables is None or (tables and "alembic_version" not in tables):
        raise fail(f"{path} is not a frontdesk database; point --db at one or at a new file")
    return url


@app.command()
def upgrade(
    revision: str = typer.Argument("head", help="With --branch: a revision of that branch."),
    db: str | None = DbOption,
    branch: str | None = BranchOption,
) -> None:
    """Upgrade core and every loaded plugin's schema (default: each to its newest revision).

    Each branch upgrades on its own: one that fails is rolled back whole and named with its
    revision and error, every other branch still upgrades, and the exit code is 1."""
    from frontdesk.migrations import MigrationFailed, upgrade_sync

    if revision != "head" and branch is None:
        raise fail("a revision other than head needs --branch")
    failed = []
    for b in _branches(branch):
        try:
            run_async(_with_conn(_url(db), upgrade_sync, b, revision))
        except MigrationFailed as exc:
            failed.append(b.name)
            typer.echo(f"{b.name}: FAILED, {exc}; nothing of this branch was applied", err=True)
            continue
        typer.echo(f"{b.name}: upgraded to {revision}")
    if branch is None:
        typer.echo(f"{JOBS}: {_jobs_upgrade(_url(db))}")
    if failed:
        typer.echo(
            f"error: {', '.join(failed)} did not upgrade (see above); the other branches did",
            err=True,
        )
        raise typer.Exit(1)


@app.command()
def downgrade(
    revision: str = typer.Argument(..., help="e.g. -1 or base"),
    db: str | None = DbOption,
    branch: str = typer.Option(..., "--branch", help="frontdesk (core) or a plugin's name."),
) -> None:
    """Downgrade one branch's schema."""
    from frontdesk.migrations import downgrade_sync

    for b in _branches(branch):
        run_async(_with_conn(_existing(_url(db)), downgrade_sync, b, revision))
        typer.echo(f"{b.name}: downgraded to {revision}")


@app.command()
def current(db: str | None = DbOption, branch: str | None = BranchOption) -> None:
    """Show each branch's revision and whether it is its head, and the branches in the
    database that no loaded plugin has (orphaned: its tables stay)."""
    from frontdesk.core import host
    from frontdesk.core.plugin_migrations import version_tables
    from frontdesk.migrations import current_sync

    registry = host.load()
    url = _existing(_url(db))
    shown = set()
    for b in _branches(branch, registry):
        rev = run_async(_with_conn(url, current_sync, b))
        head = b.head
        state = " (head)" if rev == head else f" (head is {head})"
        typer.echo(f"{b.name}: {rev or 'empty'}{state}")
        shown.add(b.name)
    if branch is not None:
        return
    typer.echo(f"{JOBS}: {_jobs_current(url)}")
    for name, rev in run_async(_in_database(url, version_tables)).items():
        if name not in shown:
            typer.echo(f"{name}: {rev or 'empty'} ({_not_loaded(registry, name)})")


async def _in_database(url: str, read: Any) -> Any:
    from frontdesk.db.engine import create_engine

    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return await read(conn)
    finally:
        await engine.dispose()


def _not_loaded(registry: Any, name: str) -> str:
    """Why a branch in the database has no loaded plugin behind it."""
    info = registry.plugins.get(name) or next((p for p in registry.skipped if p.name == name), None)
    if info is None:
        return (
            "orphaned: no installed plugin has this branch; its tables stay until dropped "
            "(reinstall the plugin, then `frontdesk db downgrade base --branch "
            f"{name}`)"
        )
    why = info.skipped or info.failure or (info.errors[0] if info.errors else info.status)
    return f"plugin not loaded: {why}"


def drop_branch(url: str, plugin: str, versions: Any) -> None:
    """Take ``plugin``'s branch down to base (its revisions drop its tables) and remove its
    version table, so nothing of the plugin stays in the database."""
    from frontdesk.migrations import Branch

    run_async(_with_conn(url, _down_and_forget, Branch(plugin, versions)))


def _down_and_forget(sync_conn: Any, branch: Any) -> None:
    from sqlalchemy import text

    from frontdesk.migrations import downgrade_sync

    downgrade_sync(sync_conn, branch, "base")
    sync_conn.execute(text(f"DROP TABLE IF EXISTS {branch.version_table}"))


# DBOS's own tables (background jobs, core/jobs.py): not an Alembic branch, but part of the
# schema every process expects; a separate file beside an SQLite database, schema dbos on
# Postgres.
JOBS = "jobs (dbos)"


def _jobs_current(url: str) -> str:
    from frontdesk.core.jobs import DBOS_SCHEMA_VERSION, current_version

    try:
        found = current_version(url)
    except Exception as exc:
        raise fail(f"database: job tables unreadable: {str(exc).splitlines()[0]}") from None
    state = " (head)" if found == DBOS_SCHEMA_VERSION else f" (head is {DBOS_SCHEMA_VERSION})"
    return f"{found or 'empty'}{state}"


def _jobs_upgrade(url: str) -> str:
    from frontdesk.core.jobs import DBOS_SCHEMA_VERSION, migrate

    try:
        migrate(url)
    except Exception as exc:
        raise fail(f"database: job tables not migrated: {str(exc).splitlines()[0]}") from None
    return f"upgraded to {DBOS_SCHEMA_VERSION}"


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="db")
