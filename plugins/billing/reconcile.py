"""Settling payments left in doubt: the reconciler every runner runs for billing.

A payment is reserved ``pending`` before the gateway is asked to move money, and completed
after. When the store, the gateway or the call process fails between the two, the row stays
pending: the money may have moved. A caller's retry under the same key settles it, but a caller
who does not retry must not leave it pending for ever (the invoice would stay blocked, the
balance would disagree with the gateway). So each runner, at its start and every
``reconcile_seconds`` (``register_housekeeping``), takes every pending charge or refund older
than ``reconcile_grace_seconds`` by the database's clock and asks the gateway's ``find`` by its
idempotency key:

- money moved: ``ledger.complete`` records it (balance and invoice status in one transaction);
- nothing under the key: ``ledger.fail`` releases the reservation (the invoice is payable
  again, and a retry under the same key may charge, since the gateway has no charge for it);
- ``find`` fails: the row stays pending for the next pass.

A payment whose tool call is still running (a live call, or a retry of it) is left alone,
whatever its age: the call settles it itself. The caller of a call that ended in doubt hears
the outcome as a follow-up (``ctx.settle_task``), written before the ledger so a pass that
fails in between repeats it, never loses it. Two runners settling at once write the same
outcome; both writes are compare-and-set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from frontdesk.core import Database

from . import gateway as gateways
from . import ledger
from .money import money
from .settings import BillingSettings
from .tables import PaymentView, _view, payments_t

if TYPE_CHECKING:
    from frontdesk.core import HousekeepingContext

log = logging.getLogger("frontdesk.billing")

BATCH = 200  # pending payments settled per pass, oldest first


@dataclass
class Pass:
    """What one pass did, for logs and tests."""

    paid: int = 0
    released: int = 0
    in_flight: int = 0
    unreachable: int = 0


async def pending_payments(db: Database, older_than_seconds: float) -> list[PaymentView]:
    """Pending payments reserved more than ``older_than_seconds`` ago by the database's clock,
    oldest first."""
    async with db.read() as conn:
        cutoff = Database.now(-older_than_seconds)
        stmt = (
            select(payments_t)
            .where(payments_t.c.status == "pending", payments_t.c.created_at < cutoff)
            .order_by(payments_t.c.created_at, payments_t.c.id)
            .limit(BATCH)
        )
        return [_view(PaymentView, r) for r in (await conn.execute(stmt)).all()]


def outcome(pay: PaymentView, moved: bool) -> str:
    """What the caller is told, in a sentence they can hear (no card data: there is none)."""
    amount = money(pay.amount)
    if pay.kind == "refund":
        if moved:
            return f"The refund of {amount} went through; its reference is {pay.id}."
        return f"The refund of {amount} did not go through, so nothing was refunded."
    about = f" for invoice {pay.invoice_id}" if pay.invoice_id else ""
    if moved:
        return f"The payment of {amount}{about} went through; its reference is {pay.id}."
    return (
        f"The payment of {amount}{about} did not go through, so nothing was charged; "
        "it can be tried again."
    )


async def settle(
    ctx: HousekeepingContext | None, db: Database, gateway: Any, pay: PaymentView
) -> bool | None:
    """Settle one pending payment: True paid, False released, None left pending (the gateway's
    ``find`` failed). ``ctx`` None: no task to tell (an operator's script)."""
    try:
        ref = await gateway.find(pay.idempotency_key)
    except Exception as exc:
        log.info("payment %s stays pending: the gateway's find failed: %r", pay.id, exc)
        return None
    moved = isinstance(ref, str) and bool(ref)
    if ctx is not None:
        await ctx.settle_task(pay.idempotency_key, succeeded=moved, message=outcome(pay, moved))
    if moved:
        await ledger.complete(db, pay.id, ref)
    else:
        await ledger.fail(db, pay.id)
    log.info("payment %s settled from the gateway: %s", pay.id, "paid" if moved else "released")
    return moved


async def reconcile(ctx: HousekeepingContext) -> Pass:
    """One pass over every pending payment past the grace (the housekeeping job)."""
    config = ctx.config if isinstance(ctx.config, BillingSettings) else BillingSettings()
    done = Pass()
    pending = await pending_payments(ctx.database, config.reconcile_grace_seconds)
    if not pending:
        return done
    gateway = gateways.gateway_for(ctx.hook, config)  # raises (logged by the runner) if broken
    for pay in pending:
        task = await ctx.find_task(pay.idempotency_key)
        if task is not None and task.status in ("running", "queued"):
            done.in_flight += 1  # the call (or its retry) is still at it: it settles it
            continue
        moved = await settle(ctx, ctx.database, gateway, pay)
        if moved is None:
            done.unreachable += 1
        elif moved:
            done.paid += 1
        else:
            done.released += 1
    return done


async def stale_count(db: Database, older_than_seconds: float) -> int:
    """Pending payments older than ``older_than_seconds`` (doctor, tests, figures)."""
    return len(await pending_payments(db, older_than_seconds))
