"""DBOS's tables (background jobs): where they live, what `db upgrade`/`db current` say of
them, and which commands never import dbos."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import FRONTDESK

from frontdesk.core import jobs

ENV = {**os.environ, "FRONTDESK_LOAD_PLUGINS": ""}


def test_the_pinned_schema_version_is_dbos_own():
    from dbos._migration import get_dbos_migrations, sqlite_migrations

    assert jobs.DBOS_SCHEMA_VERSION == len(sqlite_migrations)
    assert jobs.DBOS_SCHEMA_VERSION == len(get_dbos_migrations(jobs.SCHEMA, True, False))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FRONTDESK, *args], capture_output=True, text=True, env=ENV, timeout=120)


@pytest.mark.backends("sqlite", "postgres")
def test_db_upgrade_and_current_cover_the_job_tables(db_url, tmp_path):
    before = run("db", "current", "--db", db_url)
    if "sqlite" in db_url:
        assert before.returncode == 2  # no database yet: nothing is created by reading
    up = run("db", "upgrade", "--db", db_url)
    assert up.returncode == 0, up.stderr
    assert f"jobs (dbos): upgraded to {jobs.DBOS_SCHEMA_VERSION}" in up.stdout
    now = run("db", "current", "--db", db_url)
    assert now.returncode == 0, now.stderr
    assert f"jobs (dbos): {jobs.DBOS_SCHEMA_VERSION} (head)" in now.stdout.splitlines()
    assert all(line.endswith("(head)") for line in now.stdout.splitlines())


def test_on_sqlite_the_job_tables_are_a_file_of_their_own(tmp_path: Path):
    db = tmp_path / "frontdesk.db"
    url = f"sqlite+aiosqlite:///{db}"
    assert run("db", "upgrade", "--db", url).returncode == 0
    main = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    side = tmp_path / "frontdesk.dbos.db"
    theirs = {r[0] for r in sqlite3.connect(side).execute("SELECT name FROM sqlite_master")}
    # DBOS's generic names stay out of the file plugins' tables live in.
    generic = {"queues", "notifications", "streams", "workflow_status", "operation_outputs"}
    assert generic <= theirs and not generic & main and "tasks" in main
    assert jobs.current_version(url) == jobs.DBOS_SCHEMA_VERSION
    # WAL, as the store's own file (DBOS would leave its file in rollback-journal mode).
    engine = jobs.system_engine(jobs.derived_system_url(url))
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_operator_reads_and_the_call_side_module_do_not_import_dbos(db_url):
    assert run("db", "upgrade", "--db", db_url).returncode == 0
    code = (
        f"import sys; sys.argv=['frontdesk','tasks','list','--json','--db',{db_url!r}];"
        "from frontdesk.agents.programs.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import frontdesk.core.jobs, frontdesk.core.context\n"
        "print('DBOS' if any(m.split('.')[0] == 'dbos' for m in sys.modules) else 'CLEAN', "
        "file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert out.stderr.strip().endswith("CLEAN"), out.stderr
