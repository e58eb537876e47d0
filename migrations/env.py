"""Alembic env: runs on a connection handed in by frontdesk (see db.engine.ensure_schema)."""

from alembic import context

from frontdesk.db.models import Base

config = context.config
target_metadata = Base.metadata


def run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
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
