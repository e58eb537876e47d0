"""The hooks billing adds to frontdesk's plugin manager.

The plugin host adds them (the package's ``frontdesk_hookspecs``) before it registers any
plugin, so any plugin may implement them; when billing is not loaded they do not exist, and a
caller checks with ``getattr(ctx.hook, "<name>", None)``. Each docstring is the contract.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from frontdesk.core import Database, hookspec

if TYPE_CHECKING:
    from .gateway import PaymentGateway
    from .settings import BillingSettings


class BillingSpecs:
    """Hookspecs the billing plugin adds (``frontdesk_hookspecs``)."""

    @hookspec(firstresult=True)
    def frontdesk_payment_gateway(self, config: BillingSettings) -> PaymentGateway | None:
        """Supply the payment gateway that billing charges and refunds through.

        ``frontdesk_payment_gateway(config) -> PaymentGateway | None``

        Called with billing's own settings (``BillingSettings``: ``FRONTDESK_BILLING_*`` or
        the profile's ``[plugins.billing]``) each time ``pay_invoice`` or ``refund`` is about
        to move money (cache the client yourself if it is expensive). Return an object with
        ``async charge(account, amount, idempotency_key) -> str``, ``async refund(payment_ref,
        amount, idempotency_key) -> str`` and ``async find(idempotency_key) -> str | None``
        (see ``frontdesk.plugins.billing.PaymentGateway``), or None to leave the choice to the
        next plugin. The first non-None answer wins; with none the built-in sandbox is used.
        ``amount`` is a ``Decimal``. ``charge`` and ``refund`` must be idempotent on the key:
        called again with a key already seen they return the first ref and move no money.
        Raise ``PaymentDeclined("caller-safe reason")`` to refuse; any other exception leaves
        the payment pending, settled through ``find(idempotency_key)`` by the caller's retry
        or by every runner's reconciler (``reconcile_seconds``), so ``find`` must answer for
        a key for at least 24 hours.
        """

    @hookspec(firstresult=True)
    def billing_statement(
        self, caller: str, database: Database, start: datetime, end: datetime
    ) -> Awaitable[dict[str, Any] | None] | dict[str, Any] | None:
        """The caller's billing statement for a period, for a plugin that reports on it.

        ``billing_statement(caller, database, start, end) -> dict | None`` (may be async)

        Called by whoever needs statement lines (the reports plugin, through
        ``ctx.hook.billing_statement(caller=..., database=ctx.database, start=..., end=...)``)
        with the caller, the tool's ``ctx.database`` and the period as aware UTC datetimes,
        ``start`` inclusive and ``end`` exclusive. Billing answers (with a coroutine; await
        it) a dict ``{"currency": "USD", "balance": Decimal, "lines": [...]}``: the balance is
        what the caller owes today, and each line, in date order, is ``{"date": datetime,
        "type": "invoice" | "payment" | "refund", "reference": str, "invoice": str,
        "description": str, "amount": Decimal, "status": str}`` for an invoice issued or a
        payment made in the period (failed payments, which moved no money, are left out). It
        answers None when the caller has no billing account. The first answer wins.
        """
