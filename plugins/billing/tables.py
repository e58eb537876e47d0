"""The billing ledger's tables (SQLAlchemy Core on billing's own ``metadata``; migration
billing_0001 creates them) and the frozen views of their rows that tools read."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from .money import ZERO

# -- tables ---------------------------------------------------------------------------------
# Money is Numeric(12, 2) read back as Decimal. SQLite has no decimal type, so arithmetic on
# amounts is done in Python on Decimals, never in SQL, to keep every cent exact.
# The migration billing_0001 must match these (tests/test_migrations.py checks for drift).
metadata = MetaData()
MONEY = Numeric(12, 2, asdecimal=True)
TS = DateTime(timezone=True)
# An invoice is "open" or "paid"; a payment is a "charge" or a "refund", and its status is
# pending (the key is reserved and the gateway may or may not have moved money: reconcile it),
# succeeded (money moved and the ledger reflects it) or failed (declined, or voided).

accounts_t = Table(
    "accounts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("caller", String(200), nullable=False, unique=True),
    Column("name", String(200), nullable=False),
    Column("currency", String(3), nullable=False),
    # What the caller owes: the sum of their invoices' open amounts.
    Column("balance", MONEY, nullable=False),
    Column("created_at", TS, nullable=False),
)
invoices_t = Table(
    "invoices",
    metadata,
    Column("id", String(32), primary_key=True),  # "INV-1001"
    Column("account_id", Integer, ForeignKey("accounts.id"), nullable=False, index=True),
    # Who is paid; the agent reads it back before a payment is confirmed.
    Column("payee", String(200), nullable=False),
    Column("description", String(500), nullable=False),
    Column("amount", MONEY, nullable=False),
    Column("status", String(12), nullable=False),
    Column("due_date", Date, nullable=False),
    Column("created_at", TS, nullable=False),
    CheckConstraint("amount > 0", name="ck_invoices_amount_positive"),
)
payments_t = Table(
    "payments",
    metadata,
    Column("id", String(32), primary_key=True),  # "PAY-..." or "RFD-..."
    Column("account_id", Integer, ForeignKey("accounts.id"), nullable=False, index=True),
    Column("invoice_id", String(32), ForeignKey("invoices.id"), index=True),
    Column("amount", MONEY, nullable=False),
    Column("kind", String(12), nullable=False),
    Column("status", String(12), nullable=False),
    # Written before the gateway is called, so a retry after a crash finds it (exactly once).
    Column("idempotency_key", String(128), nullable=False, unique=True),
    Column("gateway_ref", String(200)),
    Column("refunded_payment_id", String(32), ForeignKey("payments.id"), index=True),
    Column("created_at", TS, nullable=False),
    Column("completed_at", TS),
    CheckConstraint("amount > 0", name="ck_payments_amount_positive"),
)
TABLES = ("accounts", "invoices", "payments")

_ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: ids are read aloud

# Validates a new payment inside the transaction and returns its row's values.
MakePayment = Callable[[AsyncConnection], Awaitable[dict[str, Any]]]

INVOICE_NOT_FOUND = "I couldn't find that invoice on your account."
PAYMENT_NOT_FOUND = "I couldn't find that payment on your account."


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime | None) -> datetime | None:
    """A datetime from the database as aware UTC (SQLite returns it naive)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def _new_id(prefix: str) -> str:
    return f"{prefix}-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))


# -- rows -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccountView:
    id: int
    caller: str
    name: str
    currency: str
    balance: Decimal
    created_at: datetime


@dataclass(frozen=True)
class InvoiceView:
    id: str
    account_id: int
    payee: str
    description: str
    amount: Decimal
    status: str
    due_date: date
    created_at: datetime
    open_amount: Decimal = ZERO  # amount less charges made or under way, plus refunds
    # Charges under way (reserved, the gateway's answer not yet recorded): they hold their
    # amount, so nothing else may be charged on the invoice until they are settled.
    pending: Decimal = ZERO

    @property
    def unpaid(self) -> Decimal:
        """What recorded payments leave open: what the balance counts, so "paid" and the
        balance always agree (a charge under way is not paid until it is settled)."""
        return self.open_amount + self.pending


@dataclass(frozen=True)
class PaymentView:
    id: str
    account_id: int
    invoice_id: str | None
    amount: Decimal
    kind: str
    status: str
    idempotency_key: str
    gateway_ref: str | None
    refunded_payment_id: str | None
    created_at: datetime
    completed_at: datetime | None


def _view(cls: type, row: Any, **extra: Any) -> Any:
    m = row._mapping
    data = {f.name: m[f.name] for f in fields(cls) if f.name in m}
    for key in ("created_at", "completed_at"):
        if key in data:
            data[key] = as_utc(data[key])
    return cls(**data, **extra)


def _net_paid(rows: list[Any], *, include_pending: bool) -> Decimal:
    """Charges less refunds on one invoice. Pending charges count when checking what may
    still be paid (they reserve their amount) but not when deciding it is paid."""
    total = ZERO
    for r in rows:
        if r.kind == "charge" and (
            r.status == "succeeded" or include_pending and r.status == "pending"
        ):
            total += r.amount
        elif r.kind == "refund" and r.status == "succeeded":
            total -= r.amount
    return total


def invoice_view(row: Any, pays: list[Any]) -> InvoiceView:
    """An invoice row with what is open on it, from its payments."""
    paid = _net_paid(pays, include_pending=True)
    pending = sum((p.amount for p in pays if p.kind == "charge" and p.status == "pending"), ZERO)
    return _view(InvoiceView, row, open_amount=row.amount - paid, pending=pending)


async def _payments_for(conn: AsyncConnection, **where: Any) -> list[Any]:
    stmt = select(payments_t).order_by(payments_t.c.created_at, payments_t.c.id)
    for key, value in where.items():
        stmt = stmt.where(payments_t.c[key] == value)
    return list((await conn.execute(stmt)).all())


async def _invoice(
    conn: AsyncConnection, account_id: int, invoice_id: str, *, lock: bool = False
) -> InvoiceView | None:
    stmt = select(invoices_t).where(
        invoices_t.c.id == invoice_id, invoices_t.c.account_id == account_id
    )
    row = (await conn.execute(stmt.with_for_update() if lock else stmt)).one_or_none()
    if row is None:
        return None
    return invoice_view(row, await _payments_for(conn, invoice_id=invoice_id))


async def _payment(
    conn: AsyncConnection, *, lock: bool = False, **where: Any
) -> PaymentView | None:
    stmt = select(payments_t)
    for key, value in where.items():
        stmt = stmt.where(payments_t.c[key] == value)
    row = (await conn.execute(stmt.with_for_update() if lock else stmt)).one_or_none()
    return _view(PaymentView, row) if row is not None else None
