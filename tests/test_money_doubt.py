"""Issue 23, item 1: no payment left in doubt. Through a real call (run_tool) on a real
SQLite file and a real Postgres, with a scripted gateway at the network edge: a payment whose
outcome is unknown is told "being confirmed", the reconciler settles it by its key (paid, or
the reservation released), the caller hears the outcome, and balance and "paid" agree."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from livekit.agents import llm
from moneykit import (
    Gateway,
    answer_lost,
    billing_registry,
    hear_followups,
    reconcile_once,
    request_lost,
)

from frontdesk.agents.patterns import run_tool
from frontdesk.agents.runtime import CallRuntime
from frontdesk.core import Database
from frontdesk.db.store import wait_for
from frontdesk.plugins.billing import ledger
from frontdesk.plugins.billing.reconcile import pending_payments

pytestmark = pytest.mark.backends("sqlite", "postgres")

PAY = {"invoice_id": "INV-1001", "amount": "100", "confirmed": True}


@pytest.fixture
def desk(settings, store, monkeypatch):
    """A caller (ada) at the billing desk of a real call, with a gateway the test scripts."""
    gw = Gateway()
    registry = billing_registry(settings, gw, monkeypatch)
    return gw, registry, call(store, registry, settings), Database(store)


def call(store, registry, settings, caller: str = "ada") -> CallRuntime:
    return CallRuntime(None, store=store, registry=registry, settings=settings, caller=caller)  # type: ignore[arg-type]


async def pay(runtime: CallRuntime, registry, args=PAY) -> str:
    return await run_tool(registry.tools["pay_invoice"], runtime, "billing", dict(args), None)


async def say(runtime: CallRuntime, registry, tool: str) -> str:
    return await run_tool(registry.tools[tool], runtime, "billing", {}, None)


async def invoice(db: Database, caller: str = "ada", invoice_id: str = "INV-1001"):
    account = await ledger.get_account(db, caller)
    return account, await ledger.find_invoice(db, account.id, invoice_id)


async def test_money_moved_but_unrecorded_is_settled_as_paid_and_the_caller_told(
    settings, store, monkeypatch, desk
):
    gw, registry, runtime, db = desk

    gw.after = answer_lost
    with pytest.raises(llm.ToolError) as heard:
        await pay(runtime, registry)
    said = str(heard.value)
    assert "being confirmed" in said and "nothing will be charged twice" in said
    assert "something went wrong" not in said
    account, inv = await invoice(db)
    assert (account.balance, inv.pending, inv.status) == (Decimal("525.15"), 100, "open")
    # While it is in doubt nothing else is charged on the invoice, and the desk says why.
    with pytest.raises(llm.ToolError, match="being confirmed"):
        await pay(runtime, registry, {**PAY, "amount": "50"})
    assert "being confirmed" in await say(runtime, registry, "account_balance")

    done = await reconcile_once(store, registry)
    assert (done.paid, done.released, done.in_flight) == (1, 0, 0)
    [payment] = await ledger.payments(db, account.id)
    assert (payment.status, payment.gateway_ref) == ("succeeded", "gw_charge_1")
    account, inv = await invoice(db)
    assert account.balance == Decimal("425.15") and inv.unpaid == Decimal("258.40")
    assert "$425.15" in await say(runtime, registry, "account_balance")
    heard = await hear_followups(store, "ada")
    assert len(heard) == 1 and "went through" in heard[0][1] and payment.id in heard[0][1]
    assert gw.double_charges() == 0 and len(gw.moves) == 1
    assert await pending_payments(db, 0) == []
    # The caller asks again within the window: the settled answer, no charge, no follow-up.
    again = await pay(runtime, registry)
    assert "went through" in again and len(gw.moves) == 1
    assert await store.pending_followups(["ada"]) == []


async def test_a_reservation_with_no_charge_is_released_and_the_invoice_payable_again(
    settings, store, monkeypatch, desk
):
    gw, registry, runtime, db = desk

    gw.before = request_lost
    with pytest.raises(llm.ToolError, match="being confirmed"):
        await pay(runtime, registry, {**PAY, "invoice_id": "INV-1002", "amount": "120"})
    account, inv = await invoice(db, invoice_id="INV-1002")
    assert inv.pending == 120 and inv.unpaid == 120

    done = await reconcile_once(store, registry)
    assert (done.paid, done.released) == (0, 1)
    account, inv = await invoice(db, invoice_id="INV-1002")
    assert (inv.pending, inv.open_amount, inv.status) == (0, 120, "open")
    assert account.balance == Decimal("525.15")
    heard = await hear_followups(store, "ada")
    assert "did not go through" in heard[0][1] and "nothing was charged" in heard[0][1]
    # Payable again: the gateway is back and the invoice is paid, once.
    gw.before = None
    said = await pay(runtime, registry, {**PAY, "invoice_id": "INV-1002", "amount": "120"})
    assert said.startswith("Done: I paid $120.00")
    account, inv = await invoice(db, invoice_id="INV-1002")
    assert (inv.status, account.balance, len(gw.moves)) == ("paid", Decimal("405.15"), 1)


async def test_the_reconciler_never_settles_a_live_payment_early(
    settings, store, monkeypatch, desk
):
    gw, registry, runtime, db = desk
    held, release = asyncio.Event(), asyncio.Event()

    async def slow_network() -> None:
        held.set()
        await release.wait()

    gw.before = slow_network
    live = asyncio.ensure_future(pay(runtime, registry))
    await asyncio.wait_for(held.wait(), 15)
    # Pending, older than the grace of 0 s: still not raced, its call is running.
    assert len(await pending_payments(db, 0)) == 1
    done = await reconcile_once(store, registry)
    assert (done.in_flight, done.paid, done.released, gw.finds) == (1, 0, 0, [])
    release.set()
    assert (await live).startswith("Done: I paid $100.00")
    assert (await reconcile_once(store, registry)).paid == 0
    assert len(gw.moves) == 1 and await pending_payments(db, 0) == []


async def test_a_young_reservation_waits_out_the_grace_by_the_databases_clock(
    settings, store, monkeypatch
):
    gw = Gateway()
    registry = billing_registry(settings, gw, monkeypatch, grace=3600)
    db = Database(store)
    account = await ledger.ensure_account(db, "bo", registry.configs["billing"].seeds())
    await ledger.reserve_charge(db, account, "INV-1001", Decimal("10"), "orphan-key")
    assert len(await pending_payments(db, 0)) == 1
    done = await reconcile_once(store, registry)
    assert (done.paid, done.released, gw.finds) == (0, 0, [])
    monkeypatch.setenv("FRONTDESK_BILLING_RECONCILE_GRACE_SECONDS", "0")
    registry = billing_registry(settings, gw, monkeypatch)
    assert (await reconcile_once(store, registry)).released == 1  # no task: no one to tell


async def test_a_gateway_that_cannot_answer_leaves_the_payment_pending_for_the_next_pass(
    settings, store, monkeypatch, desk
):
    gw, registry, runtime, db = desk

    gw.after = answer_lost
    with pytest.raises(llm.ToolError, match="being confirmed"):
        await pay(runtime, registry)
    gw.find_fails = True
    assert (await reconcile_once(store, registry)).unreachable == 1
    assert len(await pending_payments(db, 0)) == 1
    assert await store.pending_followups(["ada"]) == []
    gw.find_fails = False
    assert (await reconcile_once(store, registry)).paid == 1
    assert await wait_for(store, lambda: _told(store), timeout=5)


async def _told(store) -> bool:
    return len(await store.pending_followups(["ada"])) == 1


async def test_a_trial_of_payments_in_doubt_leaves_none_pending_and_charges_none_twice(
    settings, store, monkeypatch
):
    """Twelve callers pay while the gateway loses requests and answers and the ledger write
    fails; four retry the same call. One reconciler pass later: nothing pending, nothing
    charged twice, every balance the sum of its open invoices, every caller in doubt told."""
    gw = Gateway()
    registry = billing_registry(settings, gw, monkeypatch)
    db = Database(store)
    real_complete = ledger.complete
    modes = ["ok", "answer lost", "request lost", "ledger down"] * 3
    state = {"mode": "ok"}

    async def before() -> None:
        if state["mode"] == "request lost":
            raise ConnectionError("request lost")

    async def after() -> None:
        if state["mode"] == "answer lost":
            raise ConnectionError("answer lost")

    async def complete(*args, **kwargs):
        if state["mode"] == "ledger down":
            raise OSError("store unavailable")
        return await real_complete(*args, **kwargs)

    gw.before, gw.after = before, after
    monkeypatch.setattr(ledger, "complete", complete)
    in_doubt = 0
    for n, mode in enumerate(modes):
        state["mode"] = mode
        runtime = call(store, registry, settings, caller=f"c{n}")
        mine = {**PAY, "invoice_id": f"INV-{1001 + 3 * n}"}  # each account's first invoice
        try:
            await pay(runtime, registry, mine)
        except llm.ToolError as exc:
            assert "being confirmed" in str(exc)
            in_doubt += 1
            if n % 3 == 0:  # some retry the same call at once, with the trouble gone
                state["mode"] = "ok"
                assert (await pay(runtime, registry, mine)).startswith("Done: I paid $100.00")
    state["mode"] = "ok"
    left_before = len(await pending_payments(db, 0))
    done = await reconcile_once(store, registry)
    left_after = len(await pending_payments(db, 0))
    assert left_after == 0 and gw.double_charges() == 0
    paid = len(gw.moves)
    for n in range(len(modes)):
        account = await ledger.get_account(db, f"c{n}")
        invoices = await ledger.invoices(db, account.id)
        assert account.balance == sum(i.unpaid for i in invoices)  # balance and "paid" agree
    told = len(await store.pending_followups([f"c{n}" for n in range(len(modes))]))
    assert told == done.paid + done.released
    print(
        f"figures: payments={len(modes)} in_doubt={in_doubt} pending_before={left_before} "
        f"settled_paid={done.paid} released={done.released} pending_after={left_after} "
        f"charges={paid} double_charges={gw.double_charges()} followups={told}"
    )


async def test_a_payment_whose_call_process_died_is_settled_and_told_by_a_runner(
    settings, store, monkeypatch
):
    """The call process died after the gateway charged: its row is running with a lapsed
    lease and the payment pending. A runner closes the row, its reconciler records the
    payment, and the caller (who never retried) hears that it went through."""
    from jobkit import running

    gw = Gateway()
    registry = billing_registry(settings, gw, monkeypatch)
    db = Database(store)
    account = await ledger.ensure_account(db, "fay", registry.configs["billing"].seeds())
    key = "deadbeef.1700000000000-abc123"
    await store.create(
        caller="fay", tool="pay_invoice", pattern="critical", status="running",
        department="billing", plugin="billing", idempotency_key=key,
        lease_owner="call:4242:gone", lease_seconds=-1,
    )  # fmt: skip
    pay, _ = await ledger.reserve_charge(db, account, "INV-1002", Decimal("120"), key)
    await gw.charge(account, Decimal("120"), key)  # the money moved; then the process died
    async with running(store, registry, settings):
        assert await wait_for(store, lambda: _none_pending(db), timeout=30)
    account, inv = await invoice(db, "fay", "INV-1002")
    assert (inv.status, account.balance) == ("paid", Decimal("405.15"))
    heard = await hear_followups(store, "fay")
    assert "went through" in heard[0][1] and pay.id in heard[0][1]
    assert len(gw.moves) == 1


async def _none_pending(db: Database) -> bool:
    return not await pending_payments(db, 0)
