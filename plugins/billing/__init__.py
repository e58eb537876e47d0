"""Built-in billing plugin: balances, invoices, and exactly-once payments and refunds.

Department ``billing`` with ``account_balance`` and ``list_invoices`` (interruptible) and
``pay_invoice`` and ``refund`` (critical). Confirmation is enforced here, not left to the LLM:
called with ``confirmed`` false a money-moving tool charges nothing and returns the amount and
payee to read back.

Exactly once (issue 6), for a charge or a refund under the call's idempotency key:
1. reserve: find the payment row for the key, or validate and insert it as ``pending``;
2. move the money with the same key (a gateway that has seen the key returns the same ref);
3. complete: mark the row ``succeeded`` and apply it to the balance and the invoice.
A retry after a crash between 2 and 3 finds the pending row and asks ``gateway.find(key)``
before charging, so money moves once and the ledger holds one row per key.

The money goes through a gateway: a plugin supplies one with the ``frontdesk_payment_gateway``
hook (below); without one the built-in ``SandboxGateway`` is used with the sandbox ledger.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BeforeValidator

from frontdesk.core import Department, ToolContext, ToolError, hookimpl, hookspec, tool
from frontdesk.core.settings import Settings
from frontdesk.db.store import TaskStore
from frontdesk.plugins import ledger
from frontdesk.plugins.ledger import AccountView, PaymentView
from frontdesk.plugins.money import money, normalize_id, parse_amount

log = logging.getLogger("frontdesk.billing")

UNREACHABLE = (
    "I couldn't reach the payment service to finish that. Nothing will be charged twice; "
    "please try again in a moment."
)


class PaymentDeclined(Exception):
    """Raised by a gateway when it refuses a charge or refund. Its text is caller-safe."""


@runtime_checkable
class PaymentGateway(Protocol):
    """What ``frontdesk_payment_gateway`` returns. Every method is keyed by the idempotency key,
    and calling ``charge`` or ``refund`` again with a key the gateway has seen must return the
    first ref without moving money again (Stripe's Idempotency-Key semantics)."""

    async def charge(self, account: AccountView, amount: Decimal, idempotency_key: str) -> str:
        """Take ``amount`` from the account holder; the gateway's reference for the charge."""
        ...

    async def refund(self, payment_ref: str, amount: Decimal, idempotency_key: str) -> str:
        """Return ``amount`` of the charge ``payment_ref``; the refund's reference."""
        ...

    async def find(self, idempotency_key: str) -> str | None:
        """The ref of a charge or refund made under this key, or None if none was made."""
        ...


class BillingSpecs:
    """Hookspecs the billing plugin adds; the plugin host registers them from
    ``frontdesk_hookspecs`` before any plugin, so other plugins may implement them."""

    @hookspec(firstresult=True)
    def frontdesk_payment_gateway(self, settings: Settings) -> PaymentGateway | None:
        """Supply the payment gateway that billing charges and refunds through.

        Called with the process's ``Settings`` each time ``pay_invoice`` or ``refund`` is about
        to move money (cache the client yourself if it is expensive). Return an object with
        ``async charge(account, amount, idempotency_key) -> str``, ``async refund(payment_ref,
        amount, idempotency_key) -> str`` and ``async find(idempotency_key) -> str | None``
        (see ``frontdesk.plugins.billing.PaymentGateway``), or None to leave the choice to the
        next plugin. The first non-None answer wins; with none the built-in sandbox is used.
        ``amount`` is a ``Decimal``. Raise ``PaymentDeclined("caller-safe reason")`` to refuse;
        any other exception leaves the payment pending, to be reconciled through ``find``.
        """


frontdesk_hookspecs = BillingSpecs


class SandboxGateway:
    """The embedded default: moves no money. A ref is derived from the idempotency key, so even
    after a crash wipes this memory a repeated key yields the same ref, as a real gateway's
    idempotency does."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}  # idempotency key -> ref
        self.calls = 0  # how many times money "moved", for tests and the demo
        # A card network round trip takes a few hundred ms; FRONTDESK_SANDBOX_GATEWAY_SECONDS
        # gives the sandbox that shape, so a demo can show a payment refusing interruption.
        self.latency = 0.0

    def _record(self, prefix: str, key: str) -> str:
        if key not in self.seen:
            self.calls += 1
            self.seen[key] = f"{prefix}_{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        return self.seen[key]

    async def charge(self, account: AccountView, amount: Decimal, idempotency_key: str) -> str:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._record("sbx_ch", idempotency_key)

    async def refund(self, payment_ref: str, amount: Decimal, idempotency_key: str) -> str:
        return self._record("sbx_re", idempotency_key)

    async def find(self, idempotency_key: str) -> str | None:
        return self.seen.get(idempotency_key)


SANDBOX = SandboxGateway()


def gateway_for(hook: Any, settings: Settings | None) -> PaymentGateway:
    """The plugin-supplied gateway, or the sandbox when no plugin supplies one."""
    SANDBOX.latency = (settings or Settings()).sandbox_gateway_seconds
    caller = getattr(hook, "frontdesk_payment_gateway", None) if hook is not None else None
    if caller is None:
        return SANDBOX
    try:
        gateway = caller(settings=settings or Settings())
    except Exception:
        # Never fall back to the sandbox here: a "payment" that moved no money is worse.
        log.exception("frontdesk_payment_gateway failed")
        raise ToolError(
            "The payment service isn't available right now, so nothing was charged."
        ) from None
    if gateway is None:
        return SANDBOX
    if not all(callable(getattr(gateway, m, None)) for m in ("charge", "refund", "find")):
        log.error("frontdesk_payment_gateway returned %r, which is not a gateway", gateway)
        raise ToolError("The payment service isn't available right now, so nothing was charged.")
    return gateway


# -- the exactly-once steps -----------------------------------------------------------------


async def _move_money(
    store: TaskStore,
    gateway: PaymentGateway,
    pay: PaymentView,
    created: bool,
    send: Callable[[], Awaitable[str]],
) -> PaymentView:
    """Steps 2 and 3 for a reserved payment: ``send()`` the money unless a retry finds that the
    gateway already has it, then record it. Leaves the row pending if the gateway's answer is
    unknown, so the caller's next attempt under the same key reconciles it."""
    if pay.status == "succeeded":
        return pay
    key = pay.idempotency_key
    try:
        ref = None if created else await gateway.find(key)
        if ref is None:
            ref = await send()
        if not isinstance(ref, str) or not ref:
            raise TypeError(f"gateway returned {ref!r} instead of a reference")
    except PaymentDeclined as exc:
        await ledger.fail(store, pay.id)
        raise ToolError(str(exc) or "The payment service declined that.") from None
    except Exception:
        log.exception("payment gateway failed for payment %s", pay.id)
        raise ToolError(UNREACHABLE) from None
    return await ledger.complete(store, pay.id, ref)


async def reconcile_payment(
    store: TaskStore, idempotency_key: str, hook: Any = None, settings: Settings | None = None
) -> PaymentView | None:
    """Settle a payment left pending by a dead process, out of band.

    Recovery does not call this today: the caller's retry settles a pending payment through
    the same steps in ``_move_money``. It is here for an operator's script, and for a
    recovery hook should one be added.

    If the gateway has the key the payment is completed; otherwise it moved no money and is
    marked failed (a later retry under the same key tries again). Returns the payment, or None
    if nothing was recorded under the key.
    """
    pay = await ledger.find_payment(store, idempotency_key=idempotency_key)
    if pay is None or pay.status != "pending":
        return pay
    ref = await gateway_for(hook, settings).find(idempotency_key)
    if ref is not None:
        return await ledger.complete(store, pay.id, ref)
    await ledger.fail(store, pay.id)
    return await ledger.find_payment(store, id=pay.id)


def _mismatch(pay: PaymentView, **expected: Any) -> None:
    # The same key for different details: refuse rather than answer for another request.
    if any(getattr(pay, k) != v for k, v in expected.items()):
        raise ToolError("That doesn't match the earlier request; please start the payment again.")


# -- tools ----------------------------------------------------------------------------------


@tool(pattern="interruptible")
async def account_balance(ctx: ToolContext) -> str:
    """Tell the caller their account balance: how much they owe and on how many open invoices."""
    account = await ledger.ensure_account(ctx.store, ctx.caller)
    open_ = [i for i in await ledger.invoices(ctx.store, account.id) if i.open_amount > 0]
    if account.balance <= 0 and not open_:
        return f"Your balance is {money(account.balance, account.currency)}; nothing is due."
    plural = "invoice" if len(open_) == 1 else "invoices"
    return (
        f"Your balance is {money(account.balance, account.currency)}, "
        f"across {len(open_)} open {plural}."
    )


@tool(pattern="interruptible")
async def list_invoices(ctx: ToolContext) -> str:
    """List the caller's invoices with their ids, amounts, what is still open and due dates."""
    account = await ledger.ensure_account(ctx.store, ctx.caller)
    items = await ledger.invoices(ctx.store, account.id)
    if not items:
        return "You have no invoices."
    cur = account.currency
    lines = []
    for inv in sorted(items, key=lambda i: (i.open_amount <= 0, i.id)):  # open ones first
        due = f"due {inv.due_date:%B} {inv.due_date.day}"
        if inv.open_amount <= 0:
            state = "paid"
        elif inv.open_amount < inv.amount:
            state = f"{money(inv.open_amount, cur)} still open, {due}"
        else:
            state = f"open, {due}"
        lines.append(
            f"{inv.id}: {inv.description}, {money(inv.amount, cur)} to {inv.payee}, {state}."
        )
    open_count = sum(1 for i in items if i.open_amount > 0)
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
    account = await ledger.ensure_account(ctx.store, ctx.caller)
    wanted = normalize_id(invoice_id, "INV")
    invoice = await ledger.find_invoice(ctx.store, account.id, wanted) if wanted else None
    if not confirmed:
        invoice = ledger.check_payable(invoice, value)
        rest = invoice.open_amount - value
        left = f" That leaves {money(rest, account.currency)} open on it." if rest > 0 else ""
        return (
            f"You're about to pay {money(value, account.currency)} to {invoice.payee} "
            f"for invoice {invoice.id}.{left} Shall I go ahead?"
        )
    if wanted is None or invoice is None:
        raise ToolError(ledger.INVOICE_NOT_FOUND)
    gateway = gateway_for(ctx.hook, ctx.settings)
    key = ctx.idempotency_key
    pay, created = await ledger.reserve_charge(ctx.store, account, invoice.id, value, key)
    _mismatch(pay, kind="charge", account_id=account.id, invoice_id=invoice.id, amount=value)
    await ctx.progress(0.5, "charging")
    pay = await _move_money(
        ctx.store, gateway, pay, created, lambda: gateway.charge(account, value, key)
    )
    return (
        f"Done: I paid {money(pay.amount, account.currency)} to {invoice.payee} for invoice "
        f"{invoice.id}. Your payment reference is {pay.id}."
    )


@tool(pattern="critical")
async def refund(ctx: ToolContext, payment_id: PaymentId, confirmed: bool = False) -> str:
    """Refund one of the caller's payments in full, by its payment reference (PAY-...).

    First call with confirmed=false: nothing is refunded, and the answer gives the amount and
    payee to read back. Call again with confirmed=true only after the caller clearly says yes.
    """
    account = await ledger.ensure_account(ctx.store, ctx.caller)
    wanted = normalize_id(payment_id, "PAY")
    original = (
        await ledger.find_payment(ctx.store, id=wanted, account_id=account.id, kind="charge")
        if wanted
        else None
    )
    if original is None:
        raise ToolError(ledger.PAYMENT_NOT_FOUND)
    invoice = (
        await ledger.find_invoice(ctx.store, account.id, original.invoice_id)
        if original.invoice_id
        else None
    )
    payee = invoice.payee if invoice else ledger.PAYEE
    about = f" on invoice {invoice.id}" if invoice else ""
    amount = money(original.amount, account.currency)
    if not confirmed:
        # Refusals (already refunded, still pending) come before the question, not after it.
        done = await ledger.payments(ctx.store, account.id)
        ledger.check_refundable(original, [p for p in done if p.refunded_payment_id == original.id])
        return (
            f"You're about to get a refund of {amount} from {payee} for payment "
            f"{original.id}{about}. Shall I go ahead?"
        )
    gateway = gateway_for(ctx.hook, ctx.settings)
    key = ctx.idempotency_key
    pay, created = await ledger.reserve_refund(ctx.store, account, original.id, key)
    _mismatch(pay, kind="refund", account_id=account.id, refunded_payment_id=original.id)
    await ctx.progress(0.5, "refunding")
    pay = await _move_money(
        ctx.store,
        gateway,
        pay,
        created,
        lambda: gateway.refund(original.gateway_ref or "", original.amount, key),
    )
    return (
        f"Done: {amount} from payment {original.id} is refunded{about}. "
        f"Your refund reference is {pay.id}."
    )


INSTRUCTIONS = """\
You are the billing desk of the Harbor Light Hotel's front desk, talking with a caller by voice.
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
