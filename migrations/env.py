"""Alembic env: runs on a connection handed in by frontdesk (see frontdesk.core.schema), for one
branch at a time: core's, or a plugin's with its own version table."""

from alembic import context

config = context.config
core_branch = config.attributes.get("core", True)
if core_branch:
    from frontdesk.db.models import Base

    target_metadata = Base.metadata
else:
    target_metadata = None  # a plugin's revisions say what they create


def _applied(ctx, step, heads, run_args) -> None:
    # Which revisions ran, so a failure can name the one that broke (frontdesk.migrations).
    if step.up_revision_id and step.is_upgrade:
        config.attributes.setdefault("applied", []).append(step.up_revision_id)


def run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=config.attributes.get("version_table", "alembic_version"),
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        on_version_apply=_applied,
    )
    context.run_migrations()


connection = config.attributes.get("connection")
if connection is None:
    # Standalone `alembic` use: build a sync engine from the URL in the config.
    import asyncio

    from frontdesk.db.engine import create_engine

    async def _main() -> None:
        engine = create_engine(config.get_main_option("sqlalchemy.url"), immediate=True)
        async with engine.begin() as conn:
            await conn.run_sync(run)
        await engine.dispose()

    asyncio.run(_main())
else:
    run(connection)
