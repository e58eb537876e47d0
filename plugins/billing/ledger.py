"""The billing ledger: accounts, invoices and the exactly-once payment steps.

The tables are billing's own (SQLAlchemy Core on billing's ``metadata``), created by billing's
migration branch (``migrations/``). Reads go through ``ctx.database.read()``; every write is one
``ctx.database.write(fn)``, run in frontdesk's serialized writer so ledger changes share its
transactions and group commit. Each check-then-write happens inside one such transaction (the
rows are locked FOR UPDATE on Postgres; SQLite's BEGIN IMMEDIATE serializes whole transactions),
so two payments racing for the same invoice cannot both pass the "not more than is open" check.
Amounts are Decimals end to end (see money.py): SQLite stores NUMERIC as REAL, so sums are
done in Python, never in SQL.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import date, datetime, timedelta, timezone
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
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from frontdesk.core import Database, ToolError

from .money import ZERO, money
from .settings import DEFAULT_PAYEE, SeedInvoice

# -- tables ---------------------------------------------------------------------------------
# Money is Numeric(12, 2) read back as Decimal. SQLite has no decimal type, so arithmetic on
# amounts is done in Python on Decimals, never in SQL, to keep every cent exact.
# The migration billing_0001 must match these (tests/test_migrations.py checks for drift).
metadata = MetaData()
MONEY = Numeric(12, 2, asdecimal=True)
TS = DateTime(timezone=True)
INVOICE_STATUSES = ("open", "paid")
PAYMENT_KINDS = ("charge", "refund")
# pending: the key is reserved and the gateway may or may not have moved money (reconcile it);
# succeeded: money moved and the ledger reflects it; failed: the gateway declined or it was voided.
PAYMENT_STATUSES = ("pending", "succeeded", "failed")

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

PAYEE = DEFAULT_PAYEE  # for a payment whose invoice is gone; invoices carry their own payee
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
    paid = _net_paid(await _payments_for(conn, invoice_id=invoice_id), include_pending=True)
    return _view(InvoiceView, row, open_amount=row.amount - paid)


async def _payment(
    conn: AsyncConnection, *, lock: bool = False, **where: Any
) -> PaymentView | None:
    stmt = select(payments_t)
    for key, value in where.items():
        stmt = stmt.where(payments_t.c[key] == value)
    row = (await conn.execute(stmt.with_for_update() if lock else stmt)).one_or_none()
    return _view(PaymentView, row) if row is not None else None


# -- reads ----------------------------------------------------------------------------------


async def get_account(db: Database, caller: str) -> AccountView | None:
    async with db.read() as conn:
        row = (
            await conn.execute(select(accounts_t).where(accounts_t.c.caller == caller))
        ).one_or_none()
    return _view(AccountView, row) if row is not None else None


async def invoices(db: Database, account_id: int) -> list[InvoiceView]:
    """The account's invoices, oldest first, each with what is still open on it."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(invoices_t)
                .where(invoices_t.c.account_id == account_id)
                .order_by(invoices_t.c.id)
            )
        ).all()
        pays = await _payments_for(conn, account_id=account_id)
    out = []
    for row in rows:
        paid = _net_paid([p for p in pays if p.invoice_id == row.id], include_pending=True)
        out.append(_view(InvoiceView, row, open_amount=row.amount - paid))
    return out


async def find_invoice(db: Database, account_id: int, invoice_id: str) -> InvoiceView | None:
    """The invoice if it is this account's; another caller's invoice is simply not found."""
    async with db.read() as conn:
        return await _invoice(conn, account_id, invoice_id)


async def find_payment(db: Database, **where: Any) -> PaymentView | None:
    async with db.read() as conn:
        return await _payment(conn, **where)


async def payments(db: Database, account_id: int) -> list[PaymentView]:
    async with db.read() as conn:
        return [_view(PaymentView, r) for r in await _payments_for(conn, account_id=account_id)]


async def statement(
    db: Database, caller: str, start: datetime, end: datetime, payee: str = DEFAULT_PAYEE
) -> dict[str, Any] | None:
    """What ``billing_statement`` answers: the caller's invoices and payments made in
    [start, end), in date order, with their balance today; None without an account. Failed
    payments moved no money, so a statement leaves them out."""
    account = await get_account(db, caller)
    if account is None:
        return None
    every_invoice = await invoices(db, account.id)
    payees = {i.id: i.payee for i in every_invoice}
    lines: list[dict[str, Any]] = []
    for inv in every_invoice:
        if start <= inv.created_at < end:
            lines.append({
                "date": inv.created_at, "type": "invoice", "reference": inv.id,
                "invoice": inv.id, "description": inv.description, "amount": inv.amount,
                "status": "paid" if inv.open_amount <= 0 else "open",
            })  # fmt: skip
    for pay in await payments(db, account.id):
        if pay.status == "failed" or not start <= pay.created_at < end:
            continue
        to = payees.get(pay.invoice_id or "", payee)
        lines.append({
            "date": pay.created_at, "type": "payment" if pay.kind == "charge" else "refund",
            "reference": pay.id, "invoice": pay.invoice_id or "",
            "description": f"paid to {to}" if pay.kind == "charge" else f"refund from {to}",
            "amount": pay.amount, "status": pay.status,
        })  # fmt: skip
    lines.sort(key=lambda line: line["date"])  # stable: invoices before payments on a tie
    return {"currency": account.currency, "balance": account.balance, "lines": lines}


# -- writes ---------------------------------------------------------------------------------


async def ensure_account(
    db: Database,
    caller: str,
    seeds: Sequence[SeedInvoice] = (),
    payee: str = DEFAULT_PAYEE,
) -> AccountView:
    """The caller's account, opened on first sight with ``seeds`` as its open invoices (billing's
    ``seed_invoices`` setting; none for a deployment, whose ledger starts empty). An invoice
    without a payee of its own is to ``payee``.

    Invoice ids come from the account id (INV-1001.. for the first account, len(seeds) per
    account), so they are unique across callers without a sequence that SQLite lacks.
    """
    if (found := await get_account(db, caller)) is not None:
        return found

    async def write(conn: AsyncConnection) -> None:
        taken = (
            await conn.execute(select(accounts_t.c.id).where(accounts_t.c.caller == caller))
        ).first()
        if taken is not None:
            return  # opened by a concurrent call between our read and this transaction
        now = utcnow()
        total = sum((seed.amount for seed in seeds), ZERO)
        account_id = (
            await conn.execute(
                insert(accounts_t).returning(accounts_t.c.id),
                {
                    "caller": caller,
                    "name": caller[:200],
                    "currency": "USD",
                    "balance": total,
                    "created_at": now,
                },
            )
        ).scalar_one()
        for n, seed in enumerate(seeds, start=1):
            await conn.execute(
                insert(invoices_t),
                {
                    "id": f"INV-{1000 + (account_id - 1) * len(seeds) + n}",
                    "account_id": account_id,
                    "payee": seed.payee or payee,
                    "description": seed.description,
                    "amount": seed.amount,
                    "status": "open",
                    "due_date": (now + timedelta(days=seed.due_days)).date(),
                    "created_at": now,
                },
            )

    try:
        await db.write(write)
    except IntegrityError:
        pass  # another process opened it first (Postgres); read theirs
    found = await get_account(db, caller)
    assert found is not None
    return found


async def _reserve(db: Database, key: str, make: MakePayment) -> tuple[PaymentView, bool]:
    """Step 1 of exactly-once: the payment row for ``key``, found, or validated and inserted as
    pending. ``make(conn)`` raises ToolError when the request is not allowed and otherwise
    returns the new row's values. A failed row under the same key (declined, or voided after
    a crash) is checked again and reused. Returns (payment, created)."""

    async def write(conn: AsyncConnection) -> tuple[PaymentView, bool]:
        existing = await _payment(conn, lock=True, idempotency_key=key)
        if existing is not None and existing.status != "failed":
            return existing, False
        values = await make(conn)
        if existing is not None:
            await conn.execute(
                update(payments_t)
                .where(payments_t.c.id == existing.id)
                .values(status="pending", completed_at=None)
            )
            return replace(existing, status="pending", completed_at=None), False
        values.update(idempotency_key=key, status="pending", gateway_ref=None, created_at=utcnow())
        row = (await conn.execute(insert(payments_t).returning(*payments_t.c), values)).one()
        return _view(PaymentView, row), True

    try:
        return await db.write(write)
    except IntegrityError:
        # Another process reserved the same key between our check and insert.
        existing = await find_payment(db, idempotency_key=key)
        if existing is None:
            raise
        return existing, False


async def reserve_charge(
    db: Database, account: AccountView, invoice_id: str, amount: Decimal, key: str
) -> tuple[PaymentView, bool]:
    async def make(conn: AsyncConnection) -> dict[str, Any]:
        check_payable(await _invoice(conn, account.id, invoice_id, lock=True), amount)
        return {"id": _new_id("PAY"), "account_id": account.id, "invoice_id": invoice_id,
                "amount": amount, "kind": "charge", "refunded_payment_id": None}  # fmt: skip

    return await _reserve(db, key, make)


def check_payable(invoice: InvoiceView | None, amount: Decimal) -> InvoiceView:
    if invoice is None:
        raise ToolError(INVOICE_NOT_FOUND)
    if invoice.open_amount <= 0:
        raise ToolError(f"Invoice {invoice.id} is already paid.")
    if amount > invoice.open_amount:
        raise ToolError(
            f"That's more than the {money(invoice.open_amount)} still open on invoice {invoice.id}."
        )
    return invoice


async def reserve_refund(
    db: Database, account: AccountView, payment_id: str, key: str
) -> tuple[PaymentView, bool]:
    async def make(conn: AsyncConnection) -> dict[str, Any]:
        original = await _payment(
            conn, lock=True, id=payment_id, account_id=account.id, kind="charge"
        )
        original = check_refundable(
            original, await _payments_for(conn, refunded_payment_id=payment_id)
        )
        return {"id": _new_id("RFD"), "account_id": account.id, "kind": "refund",
                "invoice_id": original.invoice_id, "amount": original.amount,
                "refunded_payment_id": original.id}  # fmt: skip

    return await _reserve(db, key, make)


def check_refundable(original: PaymentView | None, refunds: list[Any]) -> PaymentView:
    if original is None:
        raise ToolError(PAYMENT_NOT_FOUND)
    if original.status == "pending":
        raise ToolError(
            f"Payment {original.id} is still being processed, so it can't be refunded yet."
        )
    if original.status != "succeeded":
        raise ToolError(f"Payment {original.id} didn't go through, so there's nothing to refund.")
    if any(r.status == "succeeded" for r in refunds):
        raise ToolError(f"Payment {original.id} has already been refunded.")
    if any(r.status == "pending" for r in refunds):
        raise ToolError(f"A refund for payment {original.id} is already under way.")
    return original


async def complete(db: Database, payment_id: str, gateway_ref: str) -> PaymentView:
    """Step 3: the gateway moved the money; record it once (a second call changes nothing)."""

    async def write(conn: AsyncConnection) -> PaymentView:
        pay = await _payment(conn, lock=True, id=payment_id)
        assert pay is not None
        if pay.status == "succeeded":
            return pay
        now = utcnow()
        await conn.execute(
            update(payments_t)
            .where(payments_t.c.id == payment_id)
            .values(status="succeeded", gateway_ref=gateway_ref, completed_at=now)
        )
        balance = (
            await conn.execute(
                select(accounts_t.c.balance)
                .where(accounts_t.c.id == pay.account_id)
                .with_for_update()
            )
        ).scalar_one()
        delta = -pay.amount if pay.kind == "charge" else pay.amount
        await conn.execute(
            update(accounts_t)
            .where(accounts_t.c.id == pay.account_id)
            .values(balance=balance + delta)
        )
        if pay.invoice_id is not None:
            total = (
                await conn.execute(
                    select(invoices_t.c.amount).where(invoices_t.c.id == pay.invoice_id)
                )
            ).scalar_one()
            paid = _net_paid(
                await _payments_for(conn, invoice_id=pay.invoice_id), include_pending=False
            )
            await conn.execute(
                update(invoices_t)
                .where(invoices_t.c.id == pay.invoice_id)
                .values(status="paid" if paid >= total else "open")
            )
        return replace(pay, status="succeeded", gateway_ref=gateway_ref, completed_at=now)

    return await db.write(write)


async def fail(db: Database, payment_id: str) -> None:
    """A pending payment that moved no money (declined, or voided after a crash)."""

    async def write(conn: AsyncConnection) -> None:
        await conn.execute(
            update(payments_t)
            .where(payments_t.c.id == payment_id, payments_t.c.status == "pending")
            .values(status="failed", completed_at=utcnow())
        )

    await db.write(write)
