"""Models and migrations agree, and the schema upgrades and downgrades cleanly, on SQLite and
Postgres."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from frontdesk.core import Database
from frontdesk.core.schema import open_store
from frontdesk.db.engine import create_engine
from frontdesk.db.models import Base
from frontdesk.migrations import (
    CORE,
    Branch,
    current_sync,
    downgrade_sync,
    head_revision,
    upgrade_sync,
)
from frontdesk.plugins import billing
from frontdesk.plugins.billing import ledger
from frontdesk.plugins.billing.settings import BillingSettings

pytestmark = pytest.mark.backends("sqlite", "postgres")
DEMO_SEED = Path(__file__).resolve().parent.parent / "examples" / "demo" / "invoices.toml"


async def _diff(url: str) -> list:
    engine = create_engine(url, immediate=True)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_sync)

            def compare(sync_conn):
                ctx = MigrationContext.configure(sync_conn, opts={"compare_type": True})
                return compare_metadata(ctx, Base.metadata)

            return await conn.run_sync(compare)
    finally:
        await engine.dispose()


async def test_models_match_migrations(db_url):
    assert await _diff(db_url) == []


async def test_upgrade_downgrade_roundtrip(db_url):
    engine = create_engine(db_url, immediate=True)

    def current(sync_conn):
        return MigrationContext.configure(sync_conn).get_current_revision()

    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_sync)
            assert await conn.run_sync(current) == head_revision()
        async with engine.begin() as conn:
            await conn.run_sync(downgrade_sync, CORE, "base")
            assert await conn.run_sync(current) is None
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_sync)
            assert await conn.run_sync(current) == head_revision()
    finally:
        await engine.dispose()


async def test_schema_created_on_first_use(db_url):

    url = db_url
    store = await open_store(url)
    try:
        task = await store.create(caller="c", tool="t", pattern="background")
        assert (await store.get(task.id)).status == "queued"
    finally:
        await store.close()
    again = await open_store(url)  # already at head: opens without migrating
    await again.close()


def test_head_revision_matches_alembic():
    from alembic.script import ScriptDirectory

    from frontdesk.migrations import alembic_config

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


# -- billing's branch: the ledger moved out of core (issue 12) -----------------------------

BILLING = Branch("billing", billing.MIGRATIONS)
# The billing tables exactly as core's old revision 0002 created them, frozen here: the move
# must adopt a database made by it, whatever billing's own migration later becomes.
_OLD_MONEY = sa.Numeric(12, 2, asdecimal=True)
_OLD_TS = sa.DateTime(timezone=True)
_old = sa.MetaData()
sa.Table(
    "accounts", _old,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("caller", sa.String(200), nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("balance", _OLD_MONEY, nullable=False),
    sa.Column("created_at", _OLD_TS, nullable=False),
)  # fmt: skip
sa.Table(
    "invoices", _old,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("account_id", sa.Integer(), sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("payee", sa.String(200), nullable=False),
    sa.Column("description", sa.String(500), nullable=False),
    sa.Column("amount", _OLD_MONEY, nullable=False),
    sa.Column("status", sa.String(12), nullable=False),
    sa.Column("due_date", sa.Date(), nullable=False),
    sa.Column("created_at", _OLD_TS, nullable=False),
    sa.CheckConstraint("amount > 0", name="ck_invoices_amount_positive"),
    sa.Index("ix_invoices_account_id", "account_id"),
)  # fmt: skip
sa.Table(
    "payments", _old,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("account_id", sa.Integer(), sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("invoice_id", sa.String(32), sa.ForeignKey("invoices.id")),
    sa.Column("amount", _OLD_MONEY, nullable=False),
    sa.Column("kind", sa.String(12), nullable=False),
    sa.Column("status", sa.String(12), nullable=False),
    sa.Column("idempotency_key", sa.String(128), nullable=False, unique=True),
    sa.Column("gateway_ref", sa.String(200)),
    sa.Column("refunded_payment_id", sa.String(32), sa.ForeignKey("payments.id")),
    sa.Column("created_at", _OLD_TS, nullable=False),
    sa.Column("completed_at", _OLD_TS),
    sa.CheckConstraint("amount > 0", name="ck_payments_amount_positive"),
    sa.Index("ix_payments_account_id", "account_id"),
    sa.Index("ix_payments_invoice_id", "invoice_id"),
    sa.Index("ix_payments_refunded_payment_id", "refunded_payment_id"),
)  # fmt: skip


def _billing_drift(sync_conn) -> list:
    """Differences between billing's tables in the database and its ``ledger.metadata``."""
    ctx = MigrationContext.configure(
        sync_conn,
        opts={
            "compare_type": True,
            "include_name": lambda name, kind, parent: kind != "table" or name in ledger.TABLES,
        },
    )
    return compare_metadata(ctx, ledger.metadata)


async def _run(url: str, fn, *args):
    engine = create_engine(url, immediate=True)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(fn, *args)
    finally:
        await engine.dispose()


def _make_old_database(sync_conn) -> None:
    """A database as it was before the move: core at 0002, the ledger in core's tables."""
    upgrade_sync(sync_conn, CORE, "0002")
    _old.create_all(sync_conn)
    now = datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)
    t = _old.tables
    # ids from the database, as the old code took them (a Postgres sequence must have moved on)
    account_id = sync_conn.execute(
        t["accounts"].insert().returning(t["accounts"].c.id),
        {"caller": "olga", "name": "olga", "currency": "USD", "balance": Decimal("405.15"),
         "created_at": now},
    ).scalar_one()  # fmt: skip
    assert account_id == 1
    sync_conn.execute(t["invoices"].insert(), [
        {"id": f"INV-100{n}", "account_id": 1, "payee": "Old Payee", "description": d,
         "amount": Decimal(a), "status": st, "due_date": date(2026, 12, n), "created_at": now}
        for n, d, a, st in [(1, "Room", "358.40", "open"), (2, "Spa", "120.00", "paid"),
                            (3, "Minibar", "46.75", "open")]
    ])  # fmt: skip
    sync_conn.execute(t["payments"].insert(), [
        {"id": "PAY-OLD123", "account_id": 1, "invoice_id": "INV-1002",
         "amount": Decimal("120.00"), "kind": "charge", "status": "succeeded",
         "idempotency_key": "old-key.1", "gateway_ref": "sbx_ch_old", "refunded_payment_id": None,
         "created_at": now, "completed_at": now},
        {"id": "PAY-PEND45", "account_id": 1, "invoice_id": "INV-1003",
         "amount": Decimal("10.00"), "kind": "charge", "status": "pending",
         "idempotency_key": "old-key.2", "gateway_ref": None, "refunded_payment_id": None,
         "created_at": now, "completed_at": None},
    ])  # fmt: skip


def _versions(sync_conn) -> tuple[str | None, str | None]:
    return current_sync(sync_conn, CORE), current_sync(sync_conn, BILLING)


async def test_an_old_database_keeps_its_ledger_through_the_move(db_url):
    await _run(db_url, _make_old_database)
    assert await _run(db_url, _versions) == ("0002", None)

    store = await open_store(db_url)  # loads the built-ins, billing among them
    try:
        async with store.read_engine.connect() as conn:
            assert await conn.run_sync(_versions) == (head_revision(), BILLING.head)
            assert await conn.run_sync(_billing_drift) == []
        db = Database(store)
        account = await ledger.get_account(db, "olga")
        assert account.balance == Decimal("405.15") and account.id == 1
        invoices = await ledger.invoices(db, account.id)
        assert [(i.id, i.status, i.open_amount) for i in invoices] == [
            ("INV-1001", "open", Decimal("358.40")),
            ("INV-1002", "paid", Decimal("0.00")),
            ("INV-1003", "open", Decimal("36.75")),  # the pending charge still reserves its 10
        ]
        payments = {p.id: p for p in await ledger.payments(db, account.id)}
        assert payments["PAY-OLD123"].gateway_ref == "sbx_ch_old"
        assert payments["PAY-PEND45"].status == "pending"  # still there to be reconciled
        # The adopted tables take new rows: a new account and its invoice ids follow on.
        seeds = BillingSettings(seed_invoices=DEMO_SEED).seeds()
        newcomer = await ledger.ensure_account(db, "nina", seeds)
        assert [i.id for i in await ledger.invoices(db, newcomer.id)] == [
            "INV-1004", "INV-1005", "INV-1006",
        ]  # fmt: skip
    finally:
        await store.close()
    again = await open_store(db_url)  # both branches at head: nothing to do
    await again.close()
    assert await _run(db_url, _versions) == (head_revision(), BILLING.head)


async def test_billing_branch_upgrade_downgrade_roundtrip(db_url):
    def tables(sync_conn) -> set[str]:
        return set(sa.inspect(sync_conn).get_table_names())

    def up(sync_conn) -> None:
        upgrade_sync(sync_conn, CORE)
        upgrade_sync(sync_conn, BILLING)

    await _run(db_url, up)
    assert await _run(db_url, _versions) == (head_revision(), BILLING.head)
    assert set(ledger.TABLES) <= await _run(db_url, tables)
    assert await _run(db_url, _billing_drift) == []

    await _run(db_url, downgrade_sync, BILLING, "base")
    assert await _run(db_url, _versions) == (head_revision(), None)
    left = await _run(db_url, tables)
    assert not set(ledger.TABLES) & left and {"tasks", "task_events", "calls"} <= left

    await _run(db_url, upgrade_sync, BILLING)
    assert await _run(db_url, _versions) == (head_revision(), BILLING.head)
    assert await _run(db_url, _billing_drift) == []


async def test_core_no_longer_has_ledger_tables(db_url):
    def tables(sync_conn) -> set[str]:
        return set(sa.inspect(sync_conn).get_table_names())

    await _run(db_url, upgrade_sync, CORE)
    assert not set(ledger.TABLES) & await _run(db_url, tables)
    assert not set(ledger.TABLES) & set(Base.metadata.tables)


def test_billing_head_revision_matches_alembic():
    from alembic.script import ScriptDirectory

    from frontdesk.migrations import alembic_config

    script = ScriptDirectory.from_config(alembic_config(BILLING))
    assert BILLING.head == script.get_current_head() == "billing_0001"
    [base] = [r for r in script.walk_revisions() if r.down_revision is None]
    assert base.branch_labels == {"billing"}
    # The package's __init__.py is not a revision: alembic skips it, as head_revision does.
    assert (billing.MIGRATIONS / "__init__.py").exists()
