"""The exactly-once steps of a payment or refund after its reservation, and what a caller hears
when the outcome is in doubt (see the package docstring: reserve, move the money, complete)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from frontdesk.core import Database, ToolError

from . import gateway as gateways
from . import ledger
from .gateway import PaymentDeclined, PaymentGateway
from .ledger import PaymentView
from .reconcile import settle
from .settings import BillingSettings

log = logging.getLogger("frontdesk.billing")


def in_doubt(what: str) -> str:
    """What a caller hears when the gateway was (or may have been) asked to move money and the
    outcome is not recorded: the reconciler settles it by the key and they hear how it ended."""
    twice = "refunded" if what == "refund" else "charged"
    return (
        f"Your {what} is being confirmed with the payment service, and nothing will be "
        f"{twice} twice. I'll let you know how it went shortly."
    )


def nothing_moved(what: str) -> str:
    """What a caller hears when the records failed before the gateway was asked: no money
    moved (a reservation that did commit is released by the reconciler)."""
    twice = "refunded" if what == "refund" else "charged"
    return (
        f"I couldn't reach our records to make that {what}, so nothing was {twice}. "
        "Please try again in a moment."
    )


@contextlib.asynccontextmanager
async def _before_money(what: str) -> AsyncIterator[None]:
    """Reads and the reservation, before the gateway is asked: a failure there moved no money."""
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:
        log.warning("%s not started: the store failed: %r", what, exc)
        raise ToolError(nothing_moved(what)) from None


async def _move_money(
    db: Database,
    gateway: PaymentGateway,
    pay: PaymentView,
    created: bool,
    send: Callable[[], Awaitable[str]],
    what: str,
) -> PaymentView:
    """Steps 2 and 3 for a reserved payment: ``send()`` the money unless a retry finds that the
    gateway already has it, then record it. When the outcome is unknown (the gateway failed or
    may have moved money, or the ledger write failed) the row stays pending, the caller hears
    that it is being confirmed, and the reconciler (reconcile.py) settles it by the key."""
    if pay.status == "succeeded":
        return pay
    key = pay.idempotency_key
    try:
        # An earlier attempt under this key may have moved money: ask before sending.
        ref = None if created else await gateway.find(key)
        if ref is None:
            ref = await send()
        if not isinstance(ref, str) or not ref:
            raise TypeError(f"gateway returned {ref!r} instead of a reference")
    except PaymentDeclined as exc:
        with contextlib.suppress(Exception):  # else the reconciler releases it (no charge)
            await ledger.fail(db, pay.id)
        raise ToolError(str(exc) or "The payment service declined that.") from None
    except Exception as exc:
        log.warning("payment %s in doubt: the gateway failed: %r; left to the reconciler",
                    pay.id, exc)  # fmt: skip
        raise ToolError(in_doubt(what)) from None
    try:
        return await ledger.complete(db, pay.id, ref)
    except Exception as exc:
        log.warning("payment %s moved (%s) but was not recorded: %r; left to the reconciler",
                    pay.id, ref, exc)  # fmt: skip
        raise ToolError(in_doubt(what)) from None


async def reconcile_payment(
    db: Database,
    idempotency_key: str,
    hook: Any = None,
    config: BillingSettings | None = None,
) -> PaymentView | None:
    """Settle one pending payment now, by its key (an operator's script). Runners settle every
    pending payment on their own (``reconcile.reconcile``, ``reconcile_seconds``).

    If the gateway has the key the payment is completed; otherwise it moved no money and is
    marked failed (a later retry under the same key tries again). Returns the payment, or None
    if nothing was recorded under the key."""
    pay = await ledger.find_payment(db, idempotency_key=idempotency_key)
    if pay is None or pay.status != "pending":
        return pay
    gateway = gateways.gateway_for(hook, config or BillingSettings())
    if await settle(None, db, gateway, pay) is None:
        raise ToolError(in_doubt(pay.kind if pay.kind == "refund" else "payment"))
    return await ledger.find_payment(db, id=pay.id)
