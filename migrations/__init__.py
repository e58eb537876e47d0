"""Alembic environment and versions, shipped in the wheel and run without an alembic.ini."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def alembic_config(url: str | None = None, connection: Any = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def upgrade_sync(sync_conn: Any, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(connection=sync_conn), revision)


def downgrade_sync(sync_conn: Any, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(connection=sync_conn), revision)
