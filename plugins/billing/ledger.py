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

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from frontdesk.core import Database, ToolError

from .money import ZERO, money
from .settings import DEFAULT_PAYEE, SeedInvoice
from .tables import (
    INVOICE_NOT_FOUND,
    PAYMENT_NOT_FOUND,
    TABLES,
    AccountView,
    InvoiceView,
    MakePayment,
    PaymentView,
    _invoice,
    _net_paid,
    _new_id,
    _payment,
    _payments_for,
    _view,
    accounts_t,
    as_utc,
    invoice_view,
    invoices_t,
    metadata,
    payments_t,
    utcnow,
)

__all__ = [
    "TABLES",
    "metadata",
    "payments_t",
    "INVOICE_NOT_FOUND",
    "PAYMENT_NOT_FOUND",
    "AccountView",
    "PaymentView",
    "InvoiceView",
]

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
    return [invoice_view(row, [p for p in pays if p.invoice_id == row.id]) for row in rows]


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
                "status": "paid" if inv.unpaid <= 0 else "open",
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
            # Reserved again now: its age (for the reconciler's grace) starts over.
            row = (
                await conn.execute(
                    update(payments_t)
                    .where(payments_t.c.id == existing.id)
                    .values(status="pending", completed_at=None, created_at=Database.now())
                    .returning(*payments_t.c)
                )
            ).one()
            return _view(PaymentView, row), False
        # The database's clock: the reconciler judges a reservation's age by it.
        values.update(idempotency_key=key, status="pending", gateway_ref=None,
                      created_at=Database.now())  # fmt: skip
        stmt = insert(payments_t).values(values).returning(*payments_t.c)
        row = (await conn.execute(stmt)).one()
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
    if invoice.pending > 0:
        # Its outcome is not recorded yet: another charge now could be a second one.
        raise ToolError(
            f"A payment on invoice {invoice.id} is still being confirmed, and nothing will be "
            "charged twice. I'll let you know how it ends; then you can pay any rest."
        )
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
        now = (
            await conn.execute(
                update(payments_t)
                .where(payments_t.c.id == payment_id)
                .values(status="succeeded", gateway_ref=gateway_ref,
                        completed_at=Database.now())
                .returning(payments_t.c.completed_at)
            )
        ).scalar_one()  # fmt: skip
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
        return replace(pay, status="succeeded", gateway_ref=gateway_ref, completed_at=as_utc(now))

    return await db.write(write)


async def fail(db: Database, payment_id: str) -> None:
    """A pending payment that moved no money (declined, or voided after a crash)."""

    async def write(conn: AsyncConnection) -> None:
        await conn.execute(
            update(payments_t)
            .where(payments_t.c.id == payment_id, payments_t.c.status == "pending")
            .values(status="failed", completed_at=Database.now())
        )

    await db.write(write)
