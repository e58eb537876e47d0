"""Throwaway PostgreSQL databases for the Postgres variants of the store and migration tests.

FRONTDESK_TEST_POSTGRES_URL names a server and a database we may connect to as an
administrator (CI: postgresql+asyncpg://postgres@127.0.0.1:5432/test). Each test gets its own
empty database, created from template0 and dropped WITH (FORCE) afterwards (about 0.1 s each
here), so tests never see each other's rows and a leaked connection cannot block the drop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

ENV_URL = "FRONTDESK_TEST_POSTGRES_URL"
ENV_REQUIRE = "FRONTDESK_REQUIRE_POSTGRES"

NOT_SET = (
    f"{ENV_URL} is not set: the Postgres variants need a PostgreSQL server "
    "(e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test); .ci/run sets it"
)


def admin_url() -> str | None:
    return os.environ.get(ENV_URL) or None


def required() -> bool:
    return os.environ.get(ENV_REQUIRE, "") not in ("", "0")


def _run(coro: object) -> object:
    # A fixture may run while pytest-asyncio's loop exists; a worker thread gets its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()  # type: ignore[arg-type]


async def _admin(url: str, *sql: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    conn = await asyncpg.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 5432,
        user=u.username or "postgres",
        password=u.password,
        database=u.database or "postgres",
        timeout=5,
    )
    try:
        for statement in sql:
            await conn.execute(statement)
    finally:
        await conn.close()


@functools.lru_cache(maxsize=1)
def check_server() -> str | None:
    """Why the Postgres variants cannot run here, or None when they can (asked once)."""
    url = admin_url()
    if url is None:
        return NOT_SET
    try:
        _run(_admin(url, "SELECT 1"))
    except Exception as exc:
        return f"PostgreSQL at {ENV_URL} is not reachable: {type(exc).__name__}: {exc}"
    return None


@contextmanager
def fresh_database(label: str = "t") -> Iterator[str]:
    """An empty database on the test server, as an asyncpg URL; dropped on exit."""
    from sqlalchemy.engine import make_url

    url = admin_url()
    assert url is not None
    name = f"fd_{label[:20]}_{uuid.uuid4().hex[:10]}".lower()
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    _run(_admin(url, f'CREATE DATABASE "{name}" TEMPLATE template0'))
    try:
        u = make_url(url).set(drivername="postgresql+asyncpg", database=name)
        yield u.render_as_string(hide_password=False)
    finally:
        _run(_admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
