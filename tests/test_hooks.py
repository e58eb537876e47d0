"""One test per core hook, named ``test_hook_<name>`` (tests/test_hooks_documented.py asks for
them): each registers through the real plugin host and checks what the hook changed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import typer
from pydantic_settings import BaseSettings
from typer.testing import CliRunner

from frontdesk.core import Department, ToolContext, hookimpl, host, tool
from frontdesk.core.profile import Profile
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.migrations import Branch, current_sync


def quiet() -> Settings:
    return Settings(_env_file=None, load_plugins="", disable_plugins=",".join(host.builtin_names()))


@tool(pattern="interruptible")
async def order_status(ctx: ToolContext, order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} has shipped"


@tool(pattern="interruptible")
async def opening_hours(ctx: ToolContext) -> str:
    """When the shop is open."""
    return "nine to five"


class Orders:
    @hookimpl
    def register_departments(self, register):
        register(Department(name="orders", description="tracks orders", tools=[order_status]))

    @hookimpl
    def register_tools(self, register):
        register(opening_hours, departments=["orders", "triage"])


def test_hook_register_departments():
    registry = host.load(quiet(), extra=[("orders", Orders())])
    dept = registry.departments["orders"]
    assert dept.plugin == "orders" and dept.description == "tracks orders"
    assert [t.name for t in registry.tools_for("orders")] == ["order_status", "opening_hours"]
    assert host.department_names(registry) == ["triage", "orders"]


def test_hook_register_tools():
    registry = host.load(quiet(), extra=[("orders", Orders())])
    assert "opening_hours" in [t.name for t in registry.tools_for("triage")]
    assert registry.tools["opening_hours"].plugin == "orders"
    assert registry.tool_departments["opening_hours"] == {"orders", "triage"}


class Commands:
    @hookimpl
    def register_commands(self, cli):
        @cli.command()
        def shipments() -> None:
            """List shipments."""
            typer.echo("3 shipments")


def test_hook_register_commands():
    registry = host.load(quiet(), extra=[("shipping", Commands())])
    app = typer.Typer()

    @app.command()
    def other() -> None:
        """A core command."""

    registry.add_commands(app)
    assert registry.plugins["shipping"].commands == ["shipments"]
    result = CliRunner().invoke(app, ["shipments"])
    assert result.exit_code == 0 and result.output.strip() == "3 shipments"


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[int, str]] = []

    @hookimpl
    def on_task_event(self, event):
        self.events.append((event.task_id, event.status))


async def test_hook_on_task_event(db_url):
    seen = Seen()
    registry = host.load(quiet(), extra=[("audit", seen)])
    store = await open_store(db_url, registry)
    store.observers.append(registry.observe)
    try:
        row = await store.create(caller="ann", tool="order_status", pattern="interruptible")
        await store.transition(row.id, "running")
        await store.transition(row.id, "succeeded", result="shipped")
        await registry.drain()
        for _ in range(100):
            if len(seen.events) == 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await store.close()
    assert seen.events == [(row.id, "queued"), (row.id, "running"), (row.id, "succeeded")]


class OrdersSettings(BaseSettings):
    limit: int = 5
    api_key: str = ""


class WithSettings:
    @hookimpl
    def register_settings(self, register):
        register(OrdersSettings)


def test_hook_register_settings(monkeypatch):
    from frontdesk.core.plugin_settings import shown

    monkeypatch.delenv("FRONTDESK_ORDERS_LIMIT", raising=False)
    monkeypatch.setenv("FRONTDESK_ORDERS_API_KEY", "sk-very-secret")
    profile = Profile.model_validate({"plugins": {"orders": {"limit": 3}}})
    registry = host.load(quiet(), extra=[("orders", WithSettings())], profile=profile)
    config = registry.configs["orders"]
    assert (config.limit, config.api_key) == (3, "sk-very-secret")  # profile, then env
    assert shown(config) == {"limit": "3", "api_key": "set"}

    monkeypatch.setenv("FRONTDESK_ORDERS_LIMIT", "7")  # the environment beats the profile
    assert (
        host.load(quiet(), extra=[("orders", WithSettings())], profile=profile)
        .configs["orders"]
        .limit
        == 7
    )

    monkeypatch.setenv("FRONTDESK_ORDERS_LIMIT", "lots")
    bad = host.load(quiet(), extra=[("orders", WithSettings())], profile=profile)
    assert "orders" not in bad.configs
    assert bad.config_errors == [
        "FRONTDESK_ORDERS_LIMIT: Input should be a valid integer, unable to parse string as an integer"
    ]
    with pytest.raises(Exception, match="FRONTDESK_ORDERS_LIMIT"):
        bad.require_valid_config()


MIGRATION = """
revision = "orders_0001"
down_revision = None
branch_labels = ("orders",)
depends_on = None

import sqlalchemy as sa
from alembic import op


def upgrade():
    op.create_table("orders_items", sa.Column("id", sa.Integer, primary_key=True))


def downgrade():
    op.drop_table("orders_items")
"""


def test_hook_register_migrations(tmp_path, db_url):
    versions = tmp_path / "orders_versions"
    versions.mkdir()
    (versions / "orders_0001_items.py").write_text(MIGRATION)

    class WithTables:
        @hookimpl
        def register_migrations(self, register):
            register(versions)

    registry = host.load(quiet(), extra=[("orders", WithTables())])
    assert registry.migrations == {"orders": Path(versions)}

    async def check() -> tuple[str | None, list[str]]:
        store = await open_store(db_url, registry)
        try:
            async with store.read_engine.connect() as conn:
                rev = await conn.run_sync(current_sync, Branch("orders", versions))
                from sqlalchemy import inspect

                tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
        finally:
            await store.close()
        return rev, tables

    rev, tables = asyncio.run(check())
    assert rev == "orders_0001"
    assert "orders_items" in tables and "alembic_version_orders" in tables


class Needs:
    """A plugin that says what it needs: its own settings, and a service URL it lacks."""

    @hookimpl
    def register_settings(self, register):
        register(OrdersSettings)

    @hookimpl
    def doctor_checks(self, config):
        rows = [("ok", f"orders limit is {config.limit}"), ("warn", "ORDERS_URL is not set")]
        return rows + [("info", "  spread\n  over lines  ")]


class AsyncNeeds:
    @hookimpl
    async def doctor_checks(self):
        await asyncio.sleep(0)
        return [("error", "the orders service needs a URL")]


class Raises:
    @hookimpl
    def doctor_checks(self):
        raise RuntimeError("boom")


class Garbage:
    @hookimpl
    def doctor_checks(self, hook):
        assert hook.doctor_checks  # it gets the hook relay, to ask other plugins
        return "all fine"


class BadRows:
    @hookimpl
    def doctor_checks(self):
        return [("great", "x"), ("ok",), ("ok", ""), ("warn", "kept")]


class Hangs:
    def __init__(self) -> None:
        import threading

        self.release = threading.Event()

    @hookimpl
    def doctor_checks(self):
        self.release.wait(10)
        return [("ok", "too late")]


def test_hook_doctor_checks(monkeypatch):
    from frontdesk.agents.programs import doctor
    from frontdesk.core.plugin_extras import Check, doctor_checks

    monkeypatch.setenv("FRONTDESK_ORDERS_LIMIT", "9")
    hangs = Hangs()
    plugins = [
        ("orders", Needs()), ("async", AsyncNeeds()), ("raises", Raises()),
        ("garbage", Garbage()), ("badrows", BadRows()), ("hangs", hangs),
    ]  # fmt: skip
    registry = host.load(quiet().model_copy(update={"hook_timeout_seconds": 0.5}), extra=plugins)
    try:
        found = doctor_checks(registry)
        rows = doctor._plugins_section(registry)  # what doctor shows
    finally:
        hangs.release.set()
    a_row = "a row is (status, message) with status ok | info | warn | error"
    assert found == [
        Check("orders", "ok", "orders limit is 9"),  # its own settings, as ctx.config
        Check("orders", "warn", "ORDERS_URL is not set"),
        Check("orders", "info", "spread over lines"),
        Check("async", "error", "the orders service needs a URL"),
        Check("raises", "error", "doctor_checks raised RuntimeError('boom')"),
        Check(
            "garbage", "error",
            "doctor_checks returned 'all fine'; expected a list of (status, message)",
        ),
        Check("badrows", "error", f"doctor_checks gave ('great', 'x'); {a_row}"),
        Check("badrows", "error", f"doctor_checks gave ('ok',); {a_row}"),
        Check("badrows", "error", f"doctor_checks gave ('ok', ''); {a_row}"),
        Check("badrows", "warn", "kept"),
        Check("hangs", "error", "doctor_checks did not return within 0.5s"),
    ]  # fmt: skip
    # Doctor shows them in its plugins section, each under its plugin's name.
    shown = [(r["item"], r["status"], r["detail"]) for r in rows if r["item"] != "error"][-11:]
    assert shown == [(c.plugin, c.status, c.message) for c in found]
    assert all(r["status"] in doctor.MARK for r in rows)
    # A plugin with nothing to say adds no row; none at all gives an empty list.
    assert doctor_checks(host.load(quiet())) == []
