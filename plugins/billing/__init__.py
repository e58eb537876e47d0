"""Built-in billing plugin: balances, invoices, and exactly-once payments and refunds.

Written as an outside package would be: it imports only ``frontdesk.core``'s public names, its
own modules, SQLAlchemy and pydantic. Its pieces:

- ``settings.py``: ``BillingSettings`` (``FRONTDESK_BILLING_*`` or ``[plugins.billing]``);
- ``ledger.py``: billing's own tables (accounts, invoices, payments) and the exactly-once steps;
- ``gateway.py``: the payment gateway protocol and the built-in ``SandboxGateway``;
- ``hookspecs.py``: the hooks billing adds (``frontdesk_payment_gateway``,
  ``billing_statement``), which other plugins implement or call through ``ctx.hook``;
- ``migrations/``: billing's Alembic branch (``alembic_version_billing``).

Department ``billing`` with ``account_balance`` and ``list_invoices`` (interruptible) and
``pay_invoice`` and ``refund`` (critical). Confirmation is enforced here, not left to the LLM:
called with ``confirmed`` false a money-moving tool charges nothing and returns the amount and
payee to read back. A new account opens with the invoices of the ``seed_invoices`` setting
(the demo's profile sets it); a deployment's ledger starts empty.

Exactly once (issue 6), for a charge or a refund under the call's idempotency key:
1. reserve: find the payment row for the key, or validate and insert it as ``pending``;
2. move the money with the same key (a gateway that has seen the key returns the same ref);
3. complete: mark the row ``succeeded`` and apply it to the balance and the invoice.
A retry after a crash between 2 and 3 finds the pending row and asks ``gateway.find(key)``
before charging, so money moves once and the ledger holds one row per key. A caller who does
not retry is not left in doubt: every runner settles each pending payment by its key
(reconcile.py, a ``register_housekeeping`` job) and the caller hears how it ended. While a
charge on an invoice is pending nothing else is charged on it, and "paid" counts only recorded
payments, so it always agrees with the balance.

The money goes through a gateway: a plugin supplies one with the ``frontdesk_payment_gateway``
hook; without one the built-in ``SandboxGateway`` is used with the sandbox ledger, and
``frontdesk doctor`` says so (``doctor_checks``), as it says when seed invoices are configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

from frontdesk.core import Database, Department, ToolContext, ToolError, hookimpl, tool

from . import gateway as gateways
from . import ledger
from .gateway import PaymentDeclined, PaymentGateway, SandboxGateway
from .hookspecs import BillingSpecs
from .ledger import AccountView, PaymentView
from .money import ZERO, normalize_id, parse_amount
from .money import money as spoken
from .reconcile import reconcile
from .settings import BillingSettings
from .steps import _before_money, _move_money, reconcile_payment

__all__ = [
    "BillingSettings",
    "BillingSpecs",
    "PaymentDeclined",
    "PaymentGateway",
    "SandboxGateway",
    "reconcile_payment",
]

log = logging.getLogger("frontdesk.billing")

# The plugin host adds these hookspecs before registering any plugin (see hookspecs.py).
frontdesk_hookspecs = BillingSpecs
MIGRATIONS = Path(__file__).parent / "migrations"

NO_INVOICES = "You have no open invoices."


def _config(ctx: ToolContext) -> BillingSettings:
    # The host hands billing its own settings; a bare context (a script) gets the defaults.
    return ctx.config if isinstance(ctx.config, BillingSettings) else BillingSettings()


async def _account(ctx: ToolContext) -> AccountView:
    config = _config(ctx)
    return await ledger.ensure_account(ctx.database, ctx.caller, config.seeds(), config.payee)


# -- the exactly-once steps -----------------------------------------------------------------


def _mismatch(pay: PaymentView, **expected: Any) -> None:
    # The same key for different details: refuse rather than answer for another request.
    if any(getattr(pay, k) != v for k, v in expected.items()):
        raise ToolError("That doesn't match the earlier request; please start the payment again.")


# -- tools ----------------------------------------------------------------------------------


@tool(pattern="interruptible")
async def account_balance(ctx: ToolContext) -> str:
    """Tell the caller their account balance: how much they owe and on how many open invoices."""
    account = await _account(ctx)
    items = await ledger.invoices(ctx.database, account.id)
    # "Open" is what recorded payments leave open, as the balance counts it.
    open_ = [i for i in items if i.unpaid > 0]
    pending = sum((i.pending for i in items), ZERO)
    confirming = (
        f" A payment of {spoken(pending, account.currency)} is still being confirmed."
        if pending > 0
        else ""
    )
    if account.balance <= 0 and not open_:
        return (
            f"Your balance is {spoken(account.balance, account.currency)}; "
            "you have no open invoices, so nothing is due."
        )
    plural = "invoice" if len(open_) == 1 else "invoices"
    return (
        f"Your balance is {spoken(account.balance, account.currency)}, "
        f"across {len(open_)} open {plural}.{confirming}"
    )


@tool(pattern="interruptible")
async def list_invoices(ctx: ToolContext) -> str:
    """List the caller's invoices with their ids, amounts, what is still open and due dates."""
    account = await _account(ctx)
    items = await ledger.invoices(ctx.database, account.id)
    if not items:
        return NO_INVOICES
    cur = account.currency
    lines = []
    for inv in sorted(items, key=lambda i: (i.unpaid <= 0, i.id)):  # open ones first
        due = f"due {inv.due_date:%B} {inv.due_date.day}"
        if inv.pending > 0:
            state = f"a payment of {spoken(inv.pending, cur)} on it is being confirmed, {due}"
        elif inv.unpaid <= 0:
            state = "paid"
        elif inv.unpaid < inv.amount:
            state = f"{spoken(inv.unpaid, cur)} still open, {due}"
        else:
            state = f"open, {due}"
        lines.append(
            f"{inv.id}: {inv.description}, {spoken(inv.amount, cur)} to {inv.payee}, {state}."
        )
    open_count = sum(1 for i in items if i.unpaid > 0)
    return f"You have {open_count} open of {len(items)} invoices. " + " ".join(lines)


def _canonical(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Spell a value one way before the tool sees it: the idempotency key hashes the
    arguments, so "50", 50 and 50.0 (or "inv 1001" and "INV-1001") must be one payment, not
    three. A value that cannot be read is passed on as is, for the tool to refuse in words."""

    def canonical(raw: Any) -> Any:
        try:
            value = parse(raw)
        except Exception:
            return raw
        return raw if value is None else str(value)

    return canonical


Amount = Annotated[str | int | float, BeforeValidator(_canonical(parse_amount))]
InvoiceId = Annotated[str, BeforeValidator(_canonical(lambda raw: normalize_id(raw, "INV")))]
PaymentId = Annotated[str, BeforeValidator(_canonical(lambda raw: normalize_id(raw, "PAY")))]


@tool(pattern="critical")
async def pay_invoice(
    ctx: ToolContext, invoice_id: InvoiceId, amount: Amount, confirmed: bool = False
) -> str:
    """Pay one of the caller's invoices, in full or in part.

    First call with confirmed=false: nothing is charged, and the answer gives the amount and
    payee to read back. Call again with the same details and confirmed=true only after the
    caller clearly says yes.
    """
    value = parse_amount(amount)
    wanted = normalize_id(invoice_id, "INV")
    async with _before_money("payment"):
        account = await _account(ctx)
        invoice = await ledger.find_invoice(ctx.database, account.id, wanted) if wanted else None
        if not confirmed:
            invoice = ledger.check_payable(invoice, value)
            rest = invoice.open_amount - value
            left = f" That leaves {spoken(rest, account.currency)} open on it." if rest > 0 else ""
            return (
                f"You're about to pay {spoken(value, account.currency)} to {invoice.payee} "
                f"for invoice {invoice.id}.{left} Shall I go ahead?"
            )
        if wanted is None or invoice is None:
            raise ToolError(ledger.INVOICE_NOT_FOUND)
        gateway = gateways.gateway_for(ctx.hook, _config(ctx))
        key = ctx.idempotency_key
        pay, created = await ledger.reserve_charge(ctx.database, account, invoice.id, value, key)
    _mismatch(pay, kind="charge", account_id=account.id, invoice_id=invoice.id, amount=value)
    await ctx.progress(0.5, "charging")
    pay = await _move_money(
        ctx.database, gateway, pay, created, lambda: gateway.charge(account, value, key), "payment"
    )
    return (
        f"Done: I paid {spoken(pay.amount, account.currency)} to {invoice.payee} for invoice "
        f"{invoice.id}. Your payment reference is {pay.id}."
    )


@tool(pattern="critical")
async def refund(ctx: ToolContext, payment_id: PaymentId, confirmed: bool = False) -> str:
    """Refund one of the caller's payments in full, by its payment reference (PAY-...).

    First call with confirmed=false: nothing is refunded, and the answer gives the amount and
    payee to read back. Call again with confirmed=true only after the caller clearly says yes.
    """
    wanted = normalize_id(payment_id, "PAY")
    async with _before_money("refund"):
        account = await _account(ctx)
        original = (
            await ledger.find_payment(ctx.database, id=wanted, account_id=account.id, kind="charge")
            if wanted
            else None
        )
        if original is None:
            raise ToolError(ledger.PAYMENT_NOT_FOUND)
        invoice = (
            await ledger.find_invoice(ctx.database, account.id, original.invoice_id)
            if original.invoice_id
            else None
        )
        payee = invoice.payee if invoice else _config(ctx).payee
        about = f" on invoice {invoice.id}" if invoice else ""
        amount = spoken(original.amount, account.currency)
        if not confirmed:
            # Refusals (already refunded, still pending) come before the question.
            done = await ledger.payments(ctx.database, account.id)
            ledger.check_refundable(
                original, [p for p in done if p.refunded_payment_id == original.id]
            )
            return (
                f"You're about to get a refund of {amount} from {payee} for payment "
                f"{original.id}{about}. Shall I go ahead?"
            )
        gateway = gateways.gateway_for(ctx.hook, _config(ctx))
        key = ctx.idempotency_key
        pay, created = await ledger.reserve_refund(ctx.database, account, original.id, key)
    _mismatch(pay, kind="refund", account_id=account.id, refunded_payment_id=original.id)
    await ctx.progress(0.5, "refunding")
    pay = await _move_money(
        ctx.database,
        gateway,
        pay,
        created,
        lambda: gateway.refund(original.gateway_ref or "", original.amount, key),
        "refund",
    )
    return (
        f"Done: {amount} from payment {original.id} is refunded{about}. "
        f"Your refund reference is {pay.id}."
    )


INSTRUCTIONS = """\
You are the billing desk, talking with a caller by voice.
You help with their balance, their invoices, paying an invoice and refunding a payment.
Use your tools for every figure; never guess or work out amounts yourself.
Before any payment or refund, call the tool with confirmed set to false, then read back the
amount and the payee exactly as the tool gives them and ask the caller to confirm.
Only after the caller clearly says yes, call the same tool again with the same details and
confirmed set to true. If they hesitate, say no or change anything, do not confirm.
Never ask for or repeat card numbers or security codes.
Keep replies to one or two short spoken sentences: no lists, symbols or markdown; say amounts
the way a person would. If the caller needs another department, transfer them."""


@hookimpl
def register_departments(register: Any) -> None:
    register(
        Department(
            name="billing",
            description="account balance, invoices, paying an invoice and refunds",
            instructions=INSTRUCTIONS,
            tools=[account_balance, list_invoices, pay_invoice, refund],
            keywords=["bill", "invoice", "pay", "payment", "balance", "refund", "charge", "owe"],
        )
    )


@hookimpl
def register_housekeeping(register: Any, config: Any) -> None:
    # Every runner settles payments left in doubt, at its start and on billing's interval.
    every = config.reconcile_seconds if isinstance(config, BillingSettings) else 30.0
    register("reconcile_payments", reconcile, every)


@hookimpl
def register_settings(register: Any) -> None:
    register(BillingSettings)


@hookimpl
def register_migrations(register: Any) -> None:
    register(MIGRATIONS)


@hookimpl
async def billing_statement(
    caller: str, database: Database, start: datetime, end: datetime
) -> dict[str, Any] | None:
    # The payee of a payment whose invoice is gone is the default; each invoice names its own.
    return await ledger.statement(database, caller, start, end)


SANDBOX_WARNING = (
    "payments go to the sandbox gateway: no money moves "
    "(install a gateway plugin, see docs/deploy.md)"
)


def _gateway_row(hook: Any, config: BillingSettings) -> tuple[str, str]:
    """Which gateway a payment would go through, as a doctor row."""
    ask = getattr(hook, "frontdesk_payment_gateway", None) if hook is not None else None
    if ask is None or not ask.get_hookimpls():
        return ("warn", SANDBOX_WARNING)
    try:
        gateway = ask(config=config)
    except Exception as exc:
        return ("error", f"the payment gateway plugin failed: {exc!r}; payments will be refused")
    if gateway is None:
        return ("warn", SANDBOX_WARNING)
    if not all(callable(getattr(gateway, m, None)) for m in ("charge", "refund", "find")):
        return ("error", f"frontdesk_payment_gateway returned {type(gateway).__name__}, which "
                "has no charge, refund and find; payments will be refused")  # fmt: skip
    return ("ok", f"payments go through {type(gateway).__module__}.{type(gateway).__qualname__}")


@hookimpl
def doctor_checks(config: Any, hook: Any) -> list[tuple[str, str]]:
    """The gateway payments go through (the sandbox is a warning) and any seeded demo invoices."""
    if not isinstance(config, BillingSettings):
        # Its settings are invalid: doctor already shows that line; the gateway waits on it.
        return [("warn", "payments are not checked until billing's settings are fixed")]
    status, message = _gateway_row(hook, config)
    rows = [(status, message)]
    if config.seed_invoices is not None:
        count = len(config.seeds())
        # Demo data against a real gateway would charge real money for made-up invoices.
        rows.append((
            "info" if message == SANDBOX_WARNING else "warn",
            f"demo invoices are seeded: every new account opens with {count} invoice"
            f"{'' if count == 1 else 's'} from {config.seed_invoices} (seed_invoices); "
            "a deployment starts with an empty ledger",
        ))  # fmt: skip
    return rows
