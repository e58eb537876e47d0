"""A plugin's fault stays in that plugin: a failing migration, a missing migrations folder, a
profile that names the desk of a plugin that did not load. Every other branch migrates, calls
run, and ``db upgrade``, ``db current``, ``doctor`` and ``plugins list`` say what is wrong."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import types
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from frontdesk.agents.programs import cli_db, cli_plugins
from frontdesk.agents.programs.doctor import gather
from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.core import Department, ToolContext, hookimpl, host, tool
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings

FIRST = """
import sqlalchemy as sa
from alembic import op

revision = "{name}_0001"
down_revision = None
branch_labels = ("{name}",)
depends_on = None


def upgrade():
    op.create_table("{name}_rows", sa.Column("id", sa.Integer, primary_key=True))


def downgrade():
    op.drop_table("{name}_rows")
"""
BROKEN = """
from alembic import op

revision = "{name}_0002"
down_revision = "{name}_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("INSERT INTO no_such_table VALUES (1)")


def downgrade():
    pass
"""


def plugin_module(tmp_path: Path, name: str, *, broken: bool = False, folder: bool = True):
    """A plugin module with a desk, a tool and a migration branch (whose second revision
    fails if ``broken``; with no folder at all if not ``folder``)."""
    versions = tmp_path / f"{name}_migrations"
    if folder:
        versions.mkdir()
        (versions / f"{name}_0001.py").write_text(FIRST.format(name=name))
        if broken:
            (versions / f"{name}_0002.py").write_text(BROKEN.format(name=name))

    @tool(name=f"{name}_count")
    async def count(ctx: ToolContext) -> str:
        """Count the rows."""
        return "none"

    module = types.ModuleType(f"fd_fault_{name}")

    @hookimpl
    def register_departments(register):
        register(Department(name=name, description=f"the {name} desk", tools=[count]))

    @hookimpl
    def register_migrations(register):
        register(versions)

    module.register_departments = register_departments
    module.register_migrations = register_migrations
    return module


def install(monkeypatch, **modules):
    """Pretend these modules are installed plugins, beside the built-ins."""
    eps = [
        ep for ep in host.entry_points(group="frontdesk") if ep.dist and ep.dist.name == "frontdesk"
    ]
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, module.__name__, module)
        eps.append(EntryPoint(name=name, value=module.__name__, group="frontdesk"))
    monkeypatch.setattr(host, "entry_points", lambda group: list(eps))
    monkeypatch.setenv("FRONTDESK_LOAD_PLUGINS", ",".join(modules))


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.fixture
def two(tmp_path, monkeypatch):
    """'alpha' (its second migration fails) and 'omega' (fine, sorted after it)."""
    install(
        monkeypatch,
        alpha=plugin_module(tmp_path, "alpha", broken=True),
        omega=plugin_module(tmp_path, "omega"),
    )
    return tmp_path / "two.db"


@pytest.mark.backends("sqlite", "postgres")
async def test_a_failing_migration_withdraws_its_plugin_and_everything_else_runs(
    two, settings, transcript
):
    settings = settings.model_copy(update={"load_plugins": None})
    registry = host.load(settings)
    store = await open_store(settings.database_url, registry)
    try:
        async with store.read_engine.connect() as conn:
            names = set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))
    finally:
        await store.close()
    info = registry.plugins["alpha"]
    assert info.status == "failed"
    assert info.failure.startswith("migration alpha_0002 failed: ")
    assert "no_such_table" in info.failure and "\n" not in info.failure
    assert "alpha" not in registry.departments and "alpha_count" not in registry.tools
    assert "omega" in registry.departments
    # Nothing of alpha's branch stays (rolled back whole); omega's and core's are there.
    assert {"omega_rows", "alembic_version_omega", "tasks"} <= names
    assert "alpha_rows" not in names and "alembic_version_alpha" not in names
    scenario = parse_scenario(
        {
            "caller": "ann",
            "steps": [
                {"user": "omega", "llm": [{"tools": [{"transfer_to_omega": {}}]}]},
                {"user": "count", "llm": [{"tools": [{"omega_count": {}}]}, {"say": "None."}]},
                {"expect": {"task": "omega_count", "status": "succeeded"}},
            ],
        }
    )
    assert await simulate([scenario], settings, host.load(settings), transcript.append) == []


def test_db_upgrade_migrates_every_other_branch_and_names_the_failure(two):
    url = f"sqlite+aiosqlite:///{two}"
    result = CliRunner().invoke(cli_db.app, ["upgrade", "--db", url])
    assert result.exit_code == 1, result.output
    assert "omega: upgraded to head" in result.stdout
    assert (
        "alpha: FAILED, migration alpha_0002 failed: no such table: no_such_table; "
        "nothing of this branch was applied"
    ) in result.stderr
    assert "omega_rows" in tables(two) and "alpha_rows" not in tables(two)
    current = CliRunner().invoke(cli_db.app, ["current", "--db", url])
    assert "alpha: empty (head is alpha_0002)" in current.stdout
    assert "omega: omega_0001 (head)" in current.stdout


def test_doctor_and_plugins_list_show_the_failing_migration(two):
    url = f"sqlite+aiosqlite:///{two}"
    assert CliRunner().invoke(cli_db.app, ["upgrade", "--db", url]).exit_code == 1
    report = asyncio.run(gather(Settings(_env_file=None, database_url=url), {}))
    plugins = report["sections"]["plugins"]
    assert report["ok"] is False
    wanted = "not loaded: migration alpha_0002 failed: no such table: no_such_table"
    assert {"item": "alpha", "status": "error", "detail": wanted} in plugins
    assert not any(r["item"] == "omega" and r["status"] == "error" for r in plugins)
    listed = CliRunner().invoke(cli_plugins.app, ["list", "--json", "--db", url])
    rows = {p["name"]: p for p in json.loads(listed.stdout)["plugins"]}
    assert rows["alpha"]["status"] == "failed" and rows["omega"]["status"] == "loaded"
    assert rows["alpha"]["failure"].startswith("migration alpha_0002 failed")
    # Tried in a transaction that was rolled back: still nothing of alpha's.
    assert "alpha_rows" not in tables(two)


async def test_doctor_finds_a_failing_migration_before_there_is_a_database(two, tmp_path):
    report = await gather(
        Settings(_env_file=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/none.db"), {}
    )
    assert not (tmp_path / "none.db").exists()
    assert any(
        r["item"] == "alpha" and r["status"] == "error" and "alpha_0002" in r["detail"]
        for r in report["sections"]["plugins"]
    )


def test_a_missing_migrations_folder_is_a_failed_plugin(tmp_path, monkeypatch):
    install(monkeypatch, hollow=plugin_module(tmp_path, "hollow", folder=False))
    listed = CliRunner().invoke(cli_plugins.app, ["list", "--json"])
    [row] = [p for p in json.loads(listed.stdout)["plugins"] if p["name"] == "hollow"]
    assert row["status"] == "failed" and row["departments"] == [] and row["tools"] == {}
    assert "no such folder (is it in the package data?" in row["failure"]
    table = CliRunner().invoke(cli_plugins.app, ["list"])
    assert table.exit_code == 0 and "FAIL" in table.stdout


async def test_a_profile_naming_the_desk_of_a_plugin_that_failed_is_a_warning(
    tmp_path, monkeypatch, transcript
):
    eps = [
        ep for ep in host.entry_points(group="frontdesk") if ep.dist and ep.dist.name == "frontdesk"
    ]
    eps.append(EntryPoint(name="reservations", value="fd_gone_module", group="frontdesk"))
    monkeypatch.setattr(host, "entry_points", lambda group: list(eps))
    profile = tmp_path / "frontdesk.toml"
    profile.write_text('[departments.reservations]\ninstructions = "Be brief."\n')
    monkeypatch.setenv("FRONTDESK_PROFILE", str(profile))
    monkeypatch.setenv("FRONTDESK_LOAD_PLUGINS", "reservations")
    settings = Settings(
        _env_file=None, load_plugins=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/p.db"
    )
    registry = host.load(settings)
    registry.require_valid_config()  # calls still run
    [warning] = registry.profile_warnings
    assert warning.startswith(
        f"{profile}: departments.reservations: desk not open: plugin 'reservations' failed to "
        "import: ModuleNotFoundError("
    )
    report = await gather(settings, {})
    assert {"item": "desk", "status": "warn", "detail": warning} in report["sections"]["profile"]
    listed = CliRunner().invoke(cli_plugins.app, ["list", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout)["profile"] == [warning]
    scenario = parse_scenario({"caller": "x", "steps": [{"user": "hello"}]})
    assert await simulate([scenario], settings, registry, transcript.append) == []


def test_db_current_shows_a_branch_whose_plugin_is_gone_as_orphaned(tmp_path, monkeypatch):
    url = f"sqlite+aiosqlite:///{tmp_path}/o.db"
    with monkeypatch.context() as m:
        install(m, kept=plugin_module(tmp_path, "kept"))
        assert CliRunner().invoke(cli_db.app, ["upgrade", "--db", url]).exit_code == 0
    current = CliRunner().invoke(cli_db.app, ["current", "--db", url])
    assert current.exit_code == 0, current.output
    assert "kept: kept_0001 (orphaned: no installed plugin has this branch" in current.stdout
