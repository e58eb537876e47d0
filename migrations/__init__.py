"""Alembic environment and versions, shipped in the wheel and run without an alembic.ini."""

from __future__ import annotations

import re
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


_REVISION = re.compile(r"^(down_revision|revision)\s*=\s*['\"]?([\w-]+|None)['\"]?", re.M)


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision, read from the version files without importing alembic: every
    command that opens the store checks it, and alembic's import alone costs ~130 ms.
    tests/test_migrations.py checks it against alembic's own answer."""
    revisions: dict[str, str | None] = {}
    for path in (HERE / "versions").glob("*.py"):
        found = dict(m.groups() for m in _REVISION.finditer(path.read_text(encoding="utf-8")))
        if "revision" in found:
            down = found.get("down_revision")
            revisions[found["revision"]] = None if down in (None, "None") else down
    heads = set(revisions) - {d for d in revisions.values() if d}
    if len(heads) != 1:
        raise RuntimeError(f"expected one migration head, found {sorted(heads)}")
    return heads.pop()


def upgrade_sync(sync_conn: Any, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(connection=sync_conn), revision)


def downgrade_sync(sync_conn: Any, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(connection=sync_conn), revision)
