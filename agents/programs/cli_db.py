"""``frontdesk db``: Alembic upgrade, current and downgrade on the configured database."""

from __future__ import annotations

from typing import Any

import typer

from frontdesk.agents.programs.exits import run_async
from frontdesk.core.settings import Settings

app = typer.Typer(help="Database schema (Alembic).", no_args_is_help=True)

DbOption = typer.Option(None, "--db", help="Database URL (default: FRONTDESK_DATABASE_URL).")


async def _with_conn(url: str, fn: Any, *args: Any) -> Any:
    from frontdesk.db.engine import create_engine

    engine = create_engine(url, immediate=True)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(fn, *args)
    except Exception as exc:
        from frontdesk.core.errors import FrontdeskError

        if isinstance(exc, FrontdeskError):
            raise
        from frontdesk.db.engine import mask_url

        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise FrontdeskError(f"database {mask_url(url)}: {reason}") from None
    finally:
        await engine.dispose()
        from frontdesk.db.engine import settle_driver_threads

        await settle_driver_threads()


def _url(db: str | None) -> str:
    return db or Settings().database_url


@app.command()
def upgrade(revision: str = typer.Argument("head"), db: str | None = DbOption) -> None:
    """Upgrade the schema (default: to the newest revision)."""
    from frontdesk.migrations import upgrade_sync

    run_async(_with_conn(_url(db), upgrade_sync, revision))
    typer.echo(f"upgraded to {revision}")


@app.command()
def downgrade(
    revision: str = typer.Argument(..., help="e.g. -1 or base"), db: str | None = DbOption
) -> None:
    """Downgrade the schema."""
    from frontdesk.migrations import downgrade_sync

    run_async(_with_conn(_url(db), downgrade_sync, revision))
    typer.echo(f"downgraded to {revision}")


@app.command()
def current(db: str | None = DbOption) -> None:
    """Show the database's revision and whether it is the head."""
    from frontdesk.migrations import head_revision

    def read(sync_conn: Any) -> str | None:
        from alembic.migration import MigrationContext

        return MigrationContext.configure(sync_conn).get_current_revision()

    rev = run_async(_with_conn(_url(db), read))
    head = head_revision()
    typer.echo(f"{rev or 'empty'}{' (head)' if rev == head else f' (head is {head})'}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="db")
