"""Alembic environment and core's versions, shipped in the wheel and run without an alembic.ini.

Core and every plugin that registers migrations are separate *branches*. Each branch has its
own versions folder and its own version table (``alembic_version`` for core,
``alembic_version_<plugin>`` for a plugin), so a plugin that is disabled or uninstalled leaves
its revision behind without stopping core, or any other plugin, from upgrading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CORE_BRANCH = "frontdesk"


@dataclass(frozen=True)
class Branch:
    name: str  # "frontdesk" for core, otherwise the plugin's name (its branch label)
    versions: Path

    @property
    def version_table(self) -> str:
        return "alembic_version" if self.name == CORE_BRANCH else f"alembic_version_{self.name}"

    @property
    def head(self) -> str:
        return head_revision(self.versions)


CORE = Branch(CORE_BRANCH, HERE / "versions")


def alembic_config(branch: Branch = CORE, *, url: str | None = None, connection: Any = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    # One folder, split on nothing: a plugin installed under a path with a space or a comma
    # would otherwise be read as two folders (and alembic warns about the legacy split).
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", str(branch.versions))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["version_table"] = branch.version_table
    cfg.attributes["core"] = branch.name == CORE_BRANCH
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


_REVISION = re.compile(r"^(down_revision|revision)\s*=\s*['\"]?([\w-]+|None)['\"]?", re.M)


@lru_cache(maxsize=32)
def head_revision(versions: Path = CORE.versions) -> str:
    """The newest revision in a versions folder, read from the files without importing alembic:
    every command that opens the store checks it, and alembic's import alone costs ~130 ms.
    tests/test_migrations.py checks it against alembic's own answer."""
    revisions: dict[str, str | None] = {}
    for path in Path(versions).glob("*.py"):
        found = dict(m.groups() for m in _REVISION.finditer(path.read_text(encoding="utf-8")))
        if "revision" in found:
            down = found.get("down_revision")
            revisions[found["revision"]] = None if down in (None, "None") else down
    heads = set(revisions) - {d for d in revisions.values() if d}
    if len(heads) != 1:
        raise RuntimeError(f"expected one migration head in {versions}, found {sorted(heads)}")
    return heads.pop()


class MigrationFailed(Exception):
    """A branch's upgrade failed: which branch, at which revision, and why (one line)."""

    def __init__(self, branch: str, revision: str | None, reason: str) -> None:
        self.branch, self.revision, self.reason = branch, revision, reason
        super().__init__(f"migration {revision or '?'} failed: {reason}")


def upgrade_sync(sync_conn: Any, branch: Branch = CORE, revision: str = "head") -> None:
    """Upgrade one branch on ``sync_conn`` (inside the caller's transaction, so a failure
    leaves none of the branch's revisions behind). ``MigrationFailed`` names the revision."""
    from alembic import command
    from sqlalchemy.exc import DBAPIError

    cfg = alembic_config(branch, connection=sync_conn)
    applied: list[str] = []
    cfg.attributes["applied"] = applied
    before = current_sync(sync_conn, branch)
    try:
        command.upgrade(cfg, revision)
    except Exception as exc:
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            raise  # the database went away: not this branch's fault
        pending = _pending(cfg, before, revision)
        failed = next((r for r in pending if r not in applied), None)
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [repr(exc)]
        raise MigrationFailed(branch.name, failed, reason[0][:300]) from exc


def _pending(cfg: Any, current: str | None, target: str) -> list[str]:
    """The revisions an upgrade from ``current`` to ``target`` runs, oldest first."""
    try:
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(cfg)
        revisions = script.iterate_revisions(target, current or "base")
        return [r.revision for r in revisions][::-1]
    except Exception:
        return []


def downgrade_sync(sync_conn: Any, branch: Branch, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(branch, connection=sync_conn), revision)


def current_sync(sync_conn: Any, branch: Branch = CORE) -> str | None:
    """The branch's revision in the database, or None when it has none (or no table)."""
    from sqlalchemy import inspect, text

    if not inspect(sync_conn).has_table(branch.version_table):
        return None
    return sync_conn.execute(text(f"SELECT version_num FROM {branch.version_table}")).scalar()
