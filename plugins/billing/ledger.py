"""The billing ledger: the sandbox accounts and the exactly-once payment steps.

Shared by the billing plugin (which moves money) and the reports plugin (which only reads).
Every write runs in the TaskStore's serialized writer, so ledger changes share its transactions
and group commit; each check-then-write happens inside one transaction (the rows are locked
FOR UPDATE on Postgres; SQLite's BEGIN IMMEDIATE serializes whole transactions), so two
payments racing for the same invoice cannot both pass the "not more than is open" check.
Amounts are Decimals end to end (see money.py): SQLite stores NUMERIC as REAL, so sums are
done in Python, never in SQL.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from frontdesk.core.errors import ToolError
from frontdesk.db.models import Account, Invoice, Payment, utcnow
from frontdesk.db.records import as_utc
from frontdesk.db.store import TaskStore
from frontdesk.plugins.money import ZERO, money

accounts_t = Account.__table__
invoices_t = Invoice.__table__
payments_t = Payment.__table__

PAYEE = "Harbor Light Hotel"
# (description, amount, days until due): what every new sandbox caller finds on their account.
SAMPLE_INVOICES = (
    ("Two nights in a harbor-view room", Decimal("358.40"), 14),
    ("Spa afternoon for two", Decimal("120.00"), 21),
    ("Room service and minibar", Decimal("46.75"), 30),
)
_ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: ids are read aloud

# Validates a new payment inside the transaction and returns its row's values.
MakePayment = Callable[[AsyncConnection], Awaitable[dict[str, Any]]]

INVOICE_NOT_FOUND = "I couldn't find that invoice on your account."
PAYMENT_NOT_FOUND = "I couldn't find that payment on your account."


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


async def get_account(store: TaskStore, caller: str) -> AccountView | None:
    async with store.read_engine.connect() as conn:
        row = (
            await conn.execute(select(accounts_t).where(accounts_t.c.caller == caller))
        ).one_or_none()
    return _view(AccountView, row) if row is not None else None


async def invoices(store: TaskStore, account_id: int) -> list[InvoiceView]:
    """The account's invoices, oldest first, each with what is still open on it."""
    async with store.read_engine.connect() as conn:
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


async def find_invoice(store: TaskStore, account_id: int, invoice_id: str) -> InvoiceView | None:
    """The invoice if it is this account's; another caller's invoice is simply not found."""
    async with store.read_engine.connect() as conn:
        return await _invoice(conn, account_id, invoice_id)


async def find_payment(store: TaskStore, **where: Any) -> PaymentView | None:
    async with store.read_engine.connect() as conn:
        return await _payment(conn, **where)


async def payments(store: TaskStore, account_id: int) -> list[PaymentView]:
    async with store.read_engine.connect() as conn:
        return [_view(PaymentView, r) for r in await _payments_for(conn, account_id=account_id)]


# -- writes ---------------------------------------------------------------------------------


async def ensure_account(store: TaskStore, caller: str) -> AccountView:
    """The caller's account; the sandbox opens one with sample open invoices on first sight.

    Invoice ids come from the account id (INV-1001.. for the first account, 3 per account), so
    they are unique across callers without a sequence that SQLite lacks.
    """
    if (found := await get_account(store, caller)) is not None:
        return found

    async def write(conn: AsyncConnection, events: list[Any]) -> None:
        taken = (
            await conn.execute(select(accounts_t.c.id).where(accounts_t.c.caller == caller))
        ).first()
        if taken is not None:
            return  # opened by a concurrent call between our read and this transaction
        now = utcnow()
        total = sum((amount for _, amount, _ in SAMPLE_INVOICES), ZERO)
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
        for n, (description, amount, due_days) in enumerate(SAMPLE_INVOICES, start=1):
            await conn.execute(
                insert(invoices_t),
                {
                    "id": f"INV-{1000 + (account_id - 1) * len(SAMPLE_INVOICES) + n}",
                    "account_id": account_id,
                    "payee": PAYEE,
                    "description": description,
                    "amount": amount,
                    "status": "open",
                    "due_date": (now + timedelta(days=due_days)).date(),
                    "created_at": now,
                },
            )

    try:
        await store.run_write(write)
    except IntegrityError:
        pass  # another process opened it first (Postgres); read theirs
    found = await get_account(store, caller)
    assert found is not None
    return found


async def _reserve(store: TaskStore, key: str, make: MakePayment) -> tuple[PaymentView, bool]:
    """Step 1 of exactly-once: the payment row for ``key``, found, or validated and inserted as
    pending. ``make(conn)`` raises ToolError when the request is not allowed and otherwise
    returns the new row's values. A failed row under the same key (declined, or voided after
    a crash) is checked again and reused. Returns (payment, created)."""

    async def write(conn: AsyncConnection, events: list[Any]) -> tuple[PaymentView, bool]:
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
        return await store.run_write(write)
    except IntegrityError:
        # Another process reserved the same key between our check and insert.
        existing = await find_payment(store, idempotency_key=key)
        if existing is None:
            raise
        return existing, False


async def reserve_charge(
    store: TaskStore, account: AccountView, invoice_id: str, amount: Decimal, key: str
) -> tuple[PaymentView, bool]:
    async def make(conn: AsyncConnection) -> dict[str, Any]:
        check_payable(await _invoice(conn, account.id, invoice_id, lock=True), amount)
        return {"id": _new_id("PAY"), "account_id": account.id, "invoice_id": invoice_id,
                "amount": amount, "kind": "charge", "refunded_payment_id": None}  # fmt: skip

    return await _reserve(store, key, make)


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
    store: TaskStore, account: AccountView, payment_id: str, key: str
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

    return await _reserve(store, key, make)


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


async def complete(store: TaskStore, payment_id: str, gateway_ref: str) -> PaymentView:
    """Step 3: the gateway moved the money; record it once (a second call changes nothing)."""

    async def write(conn: AsyncConnection, events: list[Any]) -> PaymentView:
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

    return await store.run_write(write)


async def fail(store: TaskStore, payment_id: str) -> None:
    """A pending payment that moved no money (declined, or voided after a crash)."""

    async def write(conn: AsyncConnection, events: list[Any]) -> None:
        await conn.execute(
            update(payments_t)
            .where(payments_t.c.id == payment_id, payments_t.c.status == "pending")
            .values(status="failed", completed_at=utcnow())
        )

    await store.run_write(write)
