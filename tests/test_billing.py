"""Billing against a real TaskStore on SQLite: the sandbox ledger, confirmation enforced by the
tool, exact Decimal money, and exactly-once charges and refunds across retries and crashes."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pluggy
import pytest
from sqlalchemy import func, select

from frontdesk.core import ToolContext, ToolError, hookimpl, host
from frontdesk.core.settings import Settings
from frontdesk.db.models import Payment
from frontdesk.plugins import billing, ledger, money
from frontdesk.plugins.billing import PaymentDeclined, SandboxGateway

pay_invoice = billing.pay_invoice.fn
refund = billing.refund.fn


@pytest.fixture(autouse=True)
def sandbox(monkeypatch) -> SandboxGateway:
    """A fresh sandbox per test, so charge counts are this test's alone."""
    fresh = SandboxGateway()
    monkeypatch.setattr(billing, "SANDBOX", fresh)
    return fresh


@pytest.fixture
def ctx_for(store, tmp_path):
    async def make(caller="alice", key="k1", tool="pay_invoice", hook=None) -> ToolContext:
        row = await store.create(caller=caller, tool=tool, pattern="critical", status="running")
        return ToolContext(
            caller=caller, session_id="s1", task_id=row.id, department="billing",
            idempotency_key=key, store=store, hook=hook,
            settings=Settings(reports_path=tmp_path / "r"),
        )  # fmt: skip

    return make


def hook_with(gateway) -> object:
    """A pluggy hook relay where a plugin supplies ``gateway`` through the billing hookspec."""
    pm = pluggy.PluginManager("frontdesk")
    pm.add_hookspecs(billing.frontdesk_hookspecs)

    class GatewayPlugin:
        @hookimpl
        def frontdesk_payment_gateway(self, settings):
            return gateway

    pm.register(GatewayPlugin())
    return pm.hook


class FlakyGateway(SandboxGateway):
    """Records the charge, then loses the answer: the process 'crashes' after money moved."""

    def __init__(self, lose_answers: int = 1, fail_before: int = 0) -> None:
        super().__init__()
        self.lose_answers, self.fail_before = lose_answers, fail_before

    async def charge(self, account, amount, idempotency_key):
        if self.fail_before:
            self.fail_before -= 1
            raise ConnectionError("gateway unreachable")
        ref = await super().charge(account, amount, idempotency_key)
        if self.lose_answers:
            self.lose_answers -= 1
            raise ConnectionError("connection reset after the charge")
        return ref


async def balance(store, caller="alice") -> Decimal:
    account = await ledger.get_account(store, caller)
    assert account is not None
    return account.balance


async def payment_rows(store) -> list:
    async with store.read_engine.connect() as conn:
        return list((await conn.execute(select(Payment.__table__))).all())


# -- the sandbox ledger ---------------------------------------------------------------------


async def test_sandbox_opens_account_with_open_invoices(store, ctx_for):
    ctx = await ctx_for(tool="account_balance")
    said = await billing.account_balance.fn(ctx)
    assert said == "Your balance is $525.15, across 3 open invoices."
    exact = await balance(store)
    assert isinstance(exact, Decimal) and exact == Decimal("525.15")
    account = await ledger.get_account(store, "alice")
    invoices = await ledger.invoices(store, account.id)
    assert [i.id for i in invoices] == ["INV-1001", "INV-1002", "INV-1003"]
    assert all(i.status == "open" and i.open_amount == i.amount for i in invoices)
    assert sum((i.amount for i in invoices), Decimal(0)) == exact

    # Seen again: the same account, not a second one.
    assert (await ledger.ensure_account(store, "alice")).id == account.id
    bob = await ledger.ensure_account(store, "bob")
    assert [i.id for i in await ledger.invoices(store, bob.id)] == [
        "INV-1004",
        "INV-1005",
        "INV-1006",
    ]


async def test_list_invoices_reads_ids_amounts_and_payee(ctx_for):
    said = await billing.list_invoices.fn(await ctx_for(tool="list_invoices"))
    assert said.startswith("You have 3 open of 3 invoices.")
    assert "INV-1002: Spa afternoon for two, $120.00 to Harbor Light Hotel, open, due" in said


async def test_concurrent_first_sight_opens_one_account(store):
    accounts = await asyncio.gather(*(ledger.ensure_account(store, "carol") for _ in range(5)))
    assert len({a.id for a in accounts}) == 1
    assert len(await ledger.invoices(store, accounts[0].id)) == 3


# -- paying ---------------------------------------------------------------------------------


async def test_unconfirmed_pay_charges_nothing(store, ctx_for, sandbox):
    said = await pay_invoice(await ctx_for(), "INV-1002", "120.00")
    assert said == (
        "You're about to pay $120.00 to Harbor Light Hotel for invoice INV-1002. Shall I go ahead?"
    )
    partial = await pay_invoice(await ctx_for(key="k2"), "inv 1001", "100")
    assert "That leaves $258.40 open on it." in partial
    assert await payment_rows(store) == []
    assert sandbox.calls == 0
    assert await balance(store) == Decimal("525.15")


async def test_confirmed_pay_charges_once(store, ctx_for, sandbox):
    said = await pay_invoice(await ctx_for(), "INV-1002", "120.00", confirmed=True)
    assert said.startswith("Done: I paid $120.00 to Harbor Light Hotel for invoice INV-1002.")
    assert sandbox.calls == 1
    assert await balance(store) == Decimal("405.15")
    [row] = await payment_rows(store)
    assert (row.kind, row.status, row.amount, row.idempotency_key) == (
        "charge",
        "succeeded",
        Decimal("120.00"),
        "k1",
    )
    assert row.gateway_ref.startswith("sbx_ch_") and row.id in said
    account = await ledger.get_account(store, "alice")
    assert (await ledger.find_invoice(store, account.id, "INV-1002")).status == "paid"


async def test_same_key_twice_is_one_payment_with_the_same_answer(store, ctx_for, sandbox):
    first = await pay_invoice(await ctx_for(), "INV-1001", "$358.40", confirmed=True)
    again = await pay_invoice(await ctx_for(), "INV-1001", "$358.40", confirmed=True)
    assert first == again
    assert len(await payment_rows(store)) == 1
    assert sandbox.calls == 1
    assert await balance(store) == Decimal("166.75")


async def test_crash_after_gateway_charge_then_retry_charges_once(store, ctx_for):
    gateway = FlakyGateway(lose_answers=1)
    hook = hook_with(gateway)
    with pytest.raises(ToolError, match="Nothing will be charged twice"):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    [row] = await payment_rows(store)
    assert row.status == "pending"  # the key was persisted before the side effect
    assert await balance(store) == Decimal("525.15")

    said = await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    assert said.startswith("Done: I paid $120.00")
    assert gateway.calls == 1  # reconciled through find(key), not charged again
    [row] = await payment_rows(store)
    assert row.status == "succeeded" and row.gateway_ref == gateway.seen["k1"]
    assert await balance(store) == Decimal("405.15")


async def test_crash_between_charge_and_ledger_write_then_retry(store, ctx_for, monkeypatch):
    gateway = SandboxGateway()
    hook = hook_with(gateway)
    real_complete = ledger.complete

    async def die(*args, **kwargs):
        raise OSError("process killed")  # as if SIGKILL landed after the charge

    monkeypatch.setattr(ledger, "complete", die)
    with pytest.raises(OSError):
        await pay_invoice(await ctx_for(hook=hook), "INV-1003", "46.75", confirmed=True)
    monkeypatch.setattr(ledger, "complete", real_complete)
    await pay_invoice(await ctx_for(hook=hook), "INV-1003", "46.75", confirmed=True)
    rows = await payment_rows(store)
    assert [(r.status, r.idempotency_key) for r in rows] == [("succeeded", "k1")]
    assert gateway.calls == 1
    assert await balance(store) == Decimal("478.40")


async def test_gateway_down_before_charging_then_retry(store, ctx_for):
    gateway = FlakyGateway(lose_answers=0, fail_before=1)
    hook = hook_with(gateway)
    with pytest.raises(ToolError):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    assert gateway.calls == 0
    await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    assert gateway.calls == 1 and len(await payment_rows(store)) == 1


async def test_reconcile_payment_completes_or_voids_pending_rows(store, ctx_for):
    gateway = FlakyGateway(lose_answers=1)
    hook = hook_with(gateway)
    with pytest.raises(ToolError):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    done = await billing.reconcile_payment(store, "k1", hook)
    assert done.status == "succeeded" and await balance(store) == Decimal("405.15")

    account = await ledger.get_account(store, "alice")
    pay, created = await ledger.reserve_charge(store, account, "INV-1003", Decimal("10"), "k9")
    assert created and pay.status == "pending"  # reserved, then the process died before charging
    voided = await billing.reconcile_payment(store, "k9", hook)
    assert voided.status == "failed" and await balance(store) == Decimal("405.15")
    assert await billing.reconcile_payment(store, "unknown", hook) is None
    # The same logical call retried later charges then, once.
    await pay_invoice(await ctx_for(key="k9", hook=hook), "INV-1003", "10", confirmed=True)
    assert gateway.calls == 2 and await balance(store) == Decimal("395.15")


async def test_declined_charge_fails_the_row_and_can_be_retried(store, ctx_for):
    class Declining(SandboxGateway):
        declines = 1

        async def charge(self, account, amount, idempotency_key):
            if self.declines:
                self.declines -= 1
                raise PaymentDeclined("Your card was declined.")
            return await super().charge(account, amount, idempotency_key)

    hook = hook_with(Declining())
    with pytest.raises(ToolError, match="Your card was declined."):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    [row] = await payment_rows(store)
    assert row.status == "failed" and await balance(store) == Decimal("525.15")
    await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    [row] = await payment_rows(store)
    assert row.status == "succeeded" and await balance(store) == Decimal("405.15")


async def test_partial_payments_then_over_the_rest_is_refused(store, ctx_for):
    await pay_invoice(await ctx_for(key="a"), "INV-1001", "300", confirmed=True)
    account = await ledger.get_account(store, "alice")
    inv = await ledger.find_invoice(store, account.id, "INV-1001")
    assert (inv.status, inv.open_amount) == ("open", Decimal("58.40"))
    with pytest.raises(ToolError, match=r"more than the \$58.40 still open on invoice INV-1001"):
        await pay_invoice(await ctx_for(key="b"), "INV-1001", "58.41", confirmed=True)
    await pay_invoice(await ctx_for(key="c"), "INV-1001", "58.40", confirmed=True)
    assert (await ledger.find_invoice(store, account.id, "INV-1001")).status == "paid"
    assert await balance(store) == Decimal("166.75")


async def test_racing_payments_for_one_invoice_charge_it_once(store, ctx_for, sandbox):
    ctxs = [await ctx_for(key=f"race{i}") for i in range(4)]
    results = await asyncio.gather(
        *(pay_invoice(c, "INV-1002", "120", confirmed=True) for c in ctxs), return_exceptions=True
    )
    assert sum(isinstance(r, str) for r in results) == 1
    assert all(
        str(r) == "Invoice INV-1002 is already paid." for r in results if isinstance(r, ToolError)
    )
    assert sandbox.calls == 1 and await balance(store) == Decimal("405.15")


async def test_key_reused_for_different_details_is_refused(store, ctx_for):
    await pay_invoice(await ctx_for(), "INV-1002", "20", confirmed=True)
    with pytest.raises(ToolError, match="doesn't match the earlier request"):
        await pay_invoice(await ctx_for(), "INV-1002", "30", confirmed=True)
    assert len(await payment_rows(store)) == 1


# -- bad input ------------------------------------------------------------------------------


async def test_unknown_and_other_callers_invoice_are_not_found(store, ctx_for):
    await ledger.ensure_account(store, "bob")  # owns INV-1001..1003
    for invoice_id in (
        "INV-1001",
        "INV-9999",
        "nonsense!",
        "x" * 5000,
        "'; DROP TABLE invoices; --",
    ):
        for confirmed in (False, True):
            with pytest.raises(ToolError) as err:
                await pay_invoice(
                    await ctx_for(caller="eve"), invoice_id, "10", confirmed=confirmed
                )
            assert str(err.value) == "I couldn't find that invoice on your account."
    assert await payment_rows(store) == []


async def test_already_paid_invoice_is_refused(ctx_for):
    await pay_invoice(await ctx_for(key="a"), "INV-1002", "120", confirmed=True)
    for confirmed in (False, True):
        with pytest.raises(ToolError, match="Invoice INV-1002 is already paid."):
            await pay_invoice(await ctx_for(key="b"), "INV-1002", "1", confirmed=confirmed)


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        ("-5", "more than zero"),
        ("-$5.00", "more than zero"),
        (-5, "more than zero"),
        ("0", "more than zero"),
        ("0.00", "more than zero"),
        ("12.345", "at most two decimal places"),
        (0.1 + 0.2, "at most two decimal places"),
        ("abc", "dollars and cents"),
        ("", "dollars and cents"),
        ("NaN", "dollars and cents"),
        ("inf", "dollars and cents"),
        (float("nan"), "dollars and cents"),
        (float("inf"), "dollars and cents"),
        (True, "dollars and cents"),
        ("1e3", "dollars and cents"),
        ("1,2", "dollars and cents"),
        ("9" * 80, "dollars and cents"),
        ("12345678901.00", "too large"),
        ("120.01", "more than the $120.00 still open"),
    ],
)
async def test_bad_amounts_are_refused_and_charge_nothing(store, ctx_for, sandbox, amount, message):
    for confirmed in (False, True):
        with pytest.raises(ToolError, match=message.replace("$", r"\$")):
            await pay_invoice(await ctx_for(), "INV-1002", amount, confirmed=confirmed)
    assert await payment_rows(store) == [] and sandbox.calls == 0


@pytest.mark.parametrize(
    ("raw", "exact"),
    [("120", "120.00"), ("$1,200.50", "1200.50"), ("45 dollars", "45.00"), (" 7.5 USD", "7.50"),
     (120, "120.00"), (120.1, "120.10"), ("0.10", "0.10"), (".5", "0.50"), ("120.100", "120.10")],
)  # fmt: skip
def test_parse_amount_is_exact(raw, exact):
    value = money.parse_amount(raw)
    assert isinstance(value, Decimal) and value == Decimal(exact) and str(value) == exact


# -- refunds --------------------------------------------------------------------------------


async def test_refund_confirms_then_refunds_once(store, ctx_for, sandbox):
    paid = await pay_invoice(await ctx_for(key="p"), "INV-1002", "120", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    ask = await refund(await ctx_for(key="r0", tool="refund"), payment_id.lower())
    assert ask == (
        f"You're about to get a refund of $120.00 from Harbor Light Hotel for payment "
        f"{payment_id} on invoice INV-1002. Shall I go ahead?"
    )
    assert len(await payment_rows(store)) == 1
    done = await refund(await ctx_for(key="r1", tool="refund"), payment_id, confirmed=True)
    assert done.startswith(
        f"Done: $120.00 from payment {payment_id} is refunded on invoice INV-1002."
    )
    again = await refund(await ctx_for(key="r1", tool="refund"), payment_id, confirmed=True)
    assert again == done
    assert sandbox.calls == 2  # one charge, one refund
    assert await balance(store) == Decimal("525.15")
    account = await ledger.get_account(store, "alice")
    assert (await ledger.find_invoice(store, account.id, "INV-1002")).status == "open"
    refunds = [r for r in await payment_rows(store) if r.kind == "refund"]
    assert [(r.refunded_payment_id, r.status, r.amount) for r in refunds] == [
        (payment_id, "succeeded", Decimal("120.00"))
    ]


async def test_double_refund_is_refused(store, ctx_for, sandbox):
    paid = await pay_invoice(await ctx_for(key="p"), "INV-1003", "46.75", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    await refund(await ctx_for(key="r1", tool="refund"), payment_id, confirmed=True)
    for confirmed in (False, True):
        with pytest.raises(ToolError, match=f"Payment {payment_id} has already been refunded."):
            await refund(await ctx_for(key="r2", tool="refund"), payment_id, confirmed=confirmed)
    assert sandbox.calls == 2 and len(await payment_rows(store)) == 2


async def test_unknown_or_other_callers_payment_cannot_be_refunded(store, ctx_for):
    paid = await pay_invoice(
        await ctx_for(caller="bob", key="b"), "INV-1002", "120", confirmed=True
    )
    bobs = paid.rsplit(" ", 1)[-1].rstrip(".")
    for payment_id in (bobs, "PAY-NOPE12", "", "INV-1002"):
        with pytest.raises(ToolError, match="I couldn't find that payment on your account."):
            await refund(await ctx_for(key="e", tool="refund"), payment_id, confirmed=True)
    assert len(await payment_rows(store)) == 1


# -- the hook and the plugin host -----------------------------------------------------------


async def test_gateway_hook_replaces_the_sandbox(store, ctx_for, sandbox):
    mine = SandboxGateway()
    await pay_invoice(await ctx_for(hook=hook_with(mine)), "INV-1002", "120", confirmed=True)
    assert (mine.calls, sandbox.calls) == (1, 0)


async def test_broken_gateway_hook_charges_nothing(store, ctx_for, sandbox):
    with pytest.raises(ToolError, match="nothing was charged"):
        await pay_invoice(
            await ctx_for(hook=hook_with(object())), "INV-1002", "120", confirmed=True
        )
    assert sandbox.calls == 0 and await payment_rows(store) == []


def test_host_registers_billing_and_its_hookspec():
    class GatewayPlugin:
        @hookimpl
        def frontdesk_payment_gateway(self, settings):
            return "the gateway"

    registry = host.load(Settings(load_plugins=""), extra=[("gw", GatewayPlugin())])
    assert registry.plugins["billing"].errors == [] and registry.plugins["gw"].errors == []
    dept = registry.departments["billing"]
    assert [t.name for t in dept.tools] == [
        "account_balance",
        "list_invoices",
        "pay_invoice",
        "refund",
    ]
    assert {t.name: t.pattern for t in dept.tools} == {
        "account_balance": "interruptible", "list_invoices": "interruptible",
        "pay_invoice": "critical", "refund": "critical",
    }  # fmt: skip
    assert {"pay", "refund", "owe"} <= set(dept.keywords)
    assert registry.pm.hook.frontdesk_payment_gateway(settings=Settings()) == "the gateway"
    doc = billing.BillingSpecs.frontdesk_payment_gateway.__doc__
    assert doc and "find(idempotency_key)" in doc
    # The LLM may send the amount as a string or a number; both validate.
    spec = billing.pay_invoice
    # amounts are spelled one way (the idempotency key hashes them): exact text, cents kept
    assert spec.validate({"invoice_id": "INV-1", "amount": 12.5})["amount"] == "12.50"
    assert (
        spec.validate('{"invoice_id": "INV-1", "amount": "12.50", "confirmed": true}')["confirmed"]
        is True
    )


async def test_amount_sums_stay_exact_over_many_cents(store, ctx_for):
    # 46.75 paid as 0.01 + ... would drift as floats; ten payments of 4.67 plus 0.05 must not.
    for i in range(10):
        await pay_invoice(await ctx_for(key=f"c{i}"), "INV-1003", "4.67", confirmed=True)
    await pay_invoice(await ctx_for(key="last"), "INV-1003", "0.05", confirmed=True)
    assert await balance(store) == Decimal("478.40")
    account = await ledger.get_account(store, "alice")
    assert (await ledger.find_invoice(store, account.id, "INV-1003")).status == "paid"
    async with store.read_engine.connect() as conn:
        count = (await conn.execute(select(func.count()).select_from(Payment.__table__))).scalar()
    assert count == 11


@pytest.mark.parametrize(
    ("raw", "prefix", "expected"),
    [("INV-1001", "INV", "INV-1001"), ("inv 1001", "INV", "INV-1001"), ("1001", "INV", "INV-1001"),
     ("invoice number 1001", "INV", "INV-1001"), ("Invoice #1001", "INV", "INV-1001"),
     ("pay-7k3m9q", "PAY", "PAY-7K3M9Q"), ("payment PAY-7K3M9Q", "PAY", "PAY-7K3M9Q"),
     ("PAY7K3M9Q", "PAY", "PAY-7K3M9Q"), ("INV1001", "INV", "INV-1001"),
     ("INV-1002", "PAY", None), ("", "INV", None), ("1001; DROP TABLE", "INV", None),
     ("9" * 41, "INV", None)],
)  # fmt: skip
def test_ids_as_callers_say_them(raw, prefix, expected):
    assert money.normalize_id(raw, prefix) == expected
