"""Billing against a real TaskStore: the seeded sandbox ledger and the empty one, confirmation
enforced by the tool, exact Decimal money, and exactly-once charges and refunds across retries
and crashes, told apart by a gateway double that records every call with its full key."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pluggy
import pytest
from sqlalchemy import func, select

from frontdesk.core import Database, ToolContext, ToolError, hookimpl, host
from frontdesk.core.profile import load_profile
from frontdesk.core.settings import Settings
from frontdesk.plugins import billing
from frontdesk.plugins.billing import gateway, ledger, money
from frontdesk.plugins.billing.gateway import PaymentDeclined, SandboxGateway
from frontdesk.plugins.billing.settings import BillingSettings, load_seed

ROOT = Path(__file__).resolve().parent.parent
DEMO_SEED = ROOT / "examples" / "demo" / "invoices.toml"
PAYEE = "Harbor Light Hotel"  # the demo profile's [plugins.billing] payee

pay_invoice = billing.pay_invoice.fn
refund = billing.refund.fn


@pytest.fixture(autouse=True)
def sandbox(monkeypatch) -> SandboxGateway:
    """A fresh sandbox per test, so charge counts are this test's alone."""
    fresh = SandboxGateway()
    monkeypatch.setattr(gateway, "SANDBOX", fresh)
    return fresh


@pytest.fixture
def config() -> BillingSettings:
    """The demo's billing settings: every new account opens with the three sample invoices."""
    return BillingSettings(seed_invoices=DEMO_SEED, payee=PAYEE)


@pytest.fixture
def db(store) -> Database:
    return Database(store)


@pytest.fixture
def ctx_for(store, config):
    async def make(
        caller="alice", key="k1", tool="pay_invoice", hook=None, config=config
    ) -> ToolContext:
        row = await store.create(caller=caller, tool=tool, pattern="critical", status="running")
        return ToolContext(
            caller=caller, session_id="s1", task_id=row.id, department="billing",
            idempotency_key=key, store=store, hook=hook, config=config,
        )  # fmt: skip

    return make


def hook_with(gw) -> object:
    """A pluggy hook relay where a plugin supplies ``gw`` through the billing hookspec."""
    pm = pluggy.PluginManager("frontdesk")
    pm.add_hookspecs(billing.frontdesk_hookspecs)

    class GatewayPlugin:
        @hookimpl
        def frontdesk_payment_gateway(self, config):
            return gw

    pm.register(GatewayPlugin())
    return pm.hook


class RecordingGateway:
    """A gateway double with real idempotency that writes down every call it gets, in order, as
    (method, full idempotency key). A retry that charges again instead of asking ``find``
    shows up as a second ``charge`` here, even though the ref (and the money) would be the
    same. ``lose_answers`` drops that many answers after the money moved (the process "dies"
    between the gateway and the ledger); ``fail_before`` refuses that many calls unmoved."""

    def __init__(self, lose_answers: int = 0, fail_before: int = 0) -> None:
        self.log: list[tuple[str, str]] = []
        self.seen: dict[str, str] = {}
        self.moved: list[tuple[str, str, Decimal]] = []  # (op, key, amount): money that moved
        self.lose_answers, self.fail_before = lose_answers, fail_before

    async def _move(self, op: str, key: str, amount: Decimal) -> str:
        self.log.append((op, key))
        if self.fail_before:
            self.fail_before -= 1
            raise ConnectionError("gateway unreachable")
        if key not in self.seen:
            self.seen[key] = f"rec_{op}_{len(self.seen) + 1}"
            self.moved.append((op, key, amount))
        if self.lose_answers:
            self.lose_answers -= 1
            raise ConnectionError("connection reset after the money moved")
        return self.seen[key]

    async def charge(self, account, amount, idempotency_key):
        return await self._move("charge", idempotency_key, amount)

    async def refund(self, payment_ref, amount, idempotency_key):
        return await self._move("refund", idempotency_key, amount)

    async def find(self, idempotency_key):
        self.log.append(("find", idempotency_key))
        return self.seen.get(idempotency_key)


async def balance(db, caller="alice") -> Decimal:
    account = await ledger.get_account(db, caller)
    assert account is not None
    return account.balance


async def payment_rows(db) -> list:
    async with db.read() as conn:
        return list((await conn.execute(select(ledger.payments_t))).all())


# -- settings and the seed ------------------------------------------------------------------


def test_the_demo_seed_is_the_three_sample_invoices():
    seeds = load_seed(DEMO_SEED)
    assert [(s.description, s.amount, s.due_days, s.payee) for s in seeds] == [
        ("Two nights in a harbor-view room", Decimal("358.40"), 14, None),
        ("Spa afternoon for two", Decimal("120.00"), 21, None),
        ("Room service and minibar", Decimal("46.75"), 30, None),
    ]  # None: paid to billing's payee, which the profile names


def test_settings_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FRONTDESK_BILLING_SANDBOX_SECONDS", "0.6")
    monkeypatch.setenv("FRONTDESK_BILLING_PAYEE", "Bayside Dental")
    monkeypatch.delenv("FRONTDESK_BILLING_SEED_INVOICES", raising=False)
    config = BillingSettings()
    assert (config.sandbox_seconds, config.payee, config.seed_invoices) == (
        0.6, "Bayside Dental", None,
    )  # fmt: skip
    assert config.seeds() == ()
    # The old core variable is gone; billing reads only its own.
    monkeypatch.setenv("FRONTDESK_SANDBOX_GATEWAY_SECONDS", "9")
    monkeypatch.delenv("FRONTDESK_BILLING_SANDBOX_SECONDS")
    assert BillingSettings().sandbox_seconds == 0


def test_a_relative_seed_file_is_taken_from_the_profiles_folder(monkeypatch, tmp_path):
    (tmp_path / "seed.json").write_text(
        '{"invoices": [{"description": "Cleaning", "amount": 80, "due_days": 7}]}'
    )
    profile = tmp_path / "frontdesk.toml"
    profile.write_text('[plugins.billing]\nseed_invoices = "seed.json"\npayee = "Bayside Dental"\n')
    monkeypatch.delenv("FRONTDESK_BILLING_SEED_INVOICES", raising=False)
    monkeypatch.delenv("FRONTDESK_BILLING_PAYEE", raising=False)
    monkeypatch.chdir(ROOT)  # anywhere but the profile's folder
    registry = host.load(profile=load_profile(profile))
    config = registry.configs["billing"]
    assert config.seed_invoices == (tmp_path / "seed.json").resolve()
    [seed] = config.seeds()
    assert (seed.amount, seed.payee) == (Decimal("80.00"), None)  # None: billing's payee


def test_a_seed_file_may_name_payees_for_all_or_one_of_its_invoices(tmp_path):
    seed = tmp_path / "seed.toml"
    seed.write_text(
        'payee = "Bayside Dental"\n'
        '[[invoices]]\ndescription = "Cleaning"\namount = 80\ndue_days = 7\n'
        '[[invoices]]\ndescription = "X-ray"\namount = "45.5"\ndue_days = 7\n'
        'payee = "Harbour Imaging"\n'
    )
    assert [(s.amount, s.payee) for s in load_seed(seed)] == [
        (Decimal("80.00"), "Bayside Dental"), (Decimal("45.50"), "Harbour Imaging"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[invoices]]\ndescription = 'x'\namount = '-5'\ndue_days = 1\n", "more than zero"),
        ("[[invoices]]\ndescription = 'x'\namount = '1.005'\ndue_days = 1\n", "decimal places"),
        ("[[invoices]]\ndescription = 'x'\namount = '5'\n", "invoices.0.due_days"),
        ("[[invoice]]\ndescription = 'x'\n", "invoice: Extra inputs"),
        ("not toml = = =", "is not valid toml"),
    ],
)
def test_a_bad_seed_file_is_refused_at_start_up_in_one_line(tmp_path, monkeypatch, text, problem):
    seed = tmp_path / "seed.toml"
    seed.write_text(text)
    monkeypatch.setenv("FRONTDESK_BILLING_SEED_INVOICES", str(seed))
    registry = host.load(Settings(load_plugins=""))
    [line] = registry.config_errors
    assert line.startswith("FRONTDESK_BILLING_SEED_INVOICES: ") and problem in line
    assert "\n" not in line
    monkeypatch.setenv("FRONTDESK_BILLING_SEED_INVOICES", str(tmp_path / "missing.toml"))
    [line] = host.load(Settings(load_plugins="")).config_errors
    assert "cannot read seed invoices" in line


# -- the empty ledger (a deployment) --------------------------------------------------------


async def test_without_seed_invoices_a_new_account_is_empty(db, ctx_for, sandbox):
    empty = BillingSettings(seed_invoices=None)
    said = await billing.list_invoices.fn(await ctx_for(tool="list_invoices", config=empty))
    assert said == "You have no open invoices."
    said = await billing.account_balance.fn(await ctx_for(tool="account_balance", config=empty))
    assert said == "Your balance is $0.00; you have no open invoices, so nothing is due."
    for confirmed in (False, True):
        with pytest.raises(ToolError, match="I couldn't find that invoice on your account."):
            await pay_invoice(await ctx_for(config=empty), "INV-1001", "10", confirmed=confirmed)
    account = await ledger.get_account(db, "alice")
    assert account.balance == 0 and await ledger.invoices(db, account.id) == []
    assert await payment_rows(db) == [] and sandbox.calls == 0


async def test_a_bare_context_gets_billings_defaults(store, db, monkeypatch):
    # No config handed in (a script): the defaults, so an empty ledger, not an error.
    monkeypatch.delenv("FRONTDESK_BILLING_SEED_INVOICES", raising=False)
    row = await store.create(caller="zoe", tool="list_invoices", pattern="interruptible")
    ctx = ToolContext(
        caller="zoe", session_id=None, task_id=row.id, department="billing",
        idempotency_key="z", store=store,
    )  # fmt: skip
    assert await billing.list_invoices.fn(ctx) == "You have no open invoices."


# -- the seeded sandbox ledger --------------------------------------------------------------


async def test_sandbox_opens_account_with_open_invoices(db, ctx_for, config):
    ctx = await ctx_for(tool="account_balance")
    said = await billing.account_balance.fn(ctx)
    assert said == "Your balance is $525.15, across 3 open invoices."
    exact = await balance(db)
    assert isinstance(exact, Decimal) and exact == Decimal("525.15")
    account = await ledger.get_account(db, "alice")
    invoices = await ledger.invoices(db, account.id)
    assert [i.id for i in invoices] == ["INV-1001", "INV-1002", "INV-1003"]
    assert all(i.status == "open" and i.open_amount == i.amount for i in invoices)
    assert sum((i.amount for i in invoices), Decimal(0)) == exact

    # Seen again: the same account, not a second one.
    assert (await ledger.ensure_account(db, "alice", config.seeds())).id == account.id
    bob = await ledger.ensure_account(db, "bob", config.seeds())
    assert [i.id for i in await ledger.invoices(db, bob.id)] == [
        "INV-1004",
        "INV-1005",
        "INV-1006",
    ]


async def test_list_invoices_reads_ids_amounts_and_payee(ctx_for):
    said = await billing.list_invoices.fn(await ctx_for(tool="list_invoices"))
    assert said.startswith("You have 3 open of 3 invoices.")
    assert f"INV-1002: Spa afternoon for two, $120.00 to {PAYEE}, open, due" in said


async def test_invoices_without_a_payee_of_their_own_are_to_billings_payee(tmp_path, ctx_for):
    seed = tmp_path / "seed.toml"
    seed.write_text("[[invoices]]\ndescription = 'Check-up'\namount = '95'\ndue_days = 3\n")
    config = BillingSettings(seed_invoices=seed, payee="Bayside Dental")
    said = await billing.list_invoices.fn(await ctx_for(tool="list_invoices", config=config))
    assert "INV-1001: Check-up, $95.00 to Bayside Dental, open" in said
    ask = await pay_invoice(await ctx_for(config=config), "1001", "95")
    assert (
        ask
        == "You're about to pay $95.00 to Bayside Dental for invoice INV-1001. Shall I go ahead?"
    )


async def test_concurrent_first_sight_opens_one_account(db, config):
    accounts = await asyncio.gather(
        *(ledger.ensure_account(db, "carol", config.seeds()) for _ in range(5))
    )
    assert len({a.id for a in accounts}) == 1
    assert len(await ledger.invoices(db, accounts[0].id)) == 3


# -- paying ---------------------------------------------------------------------------------


async def test_unconfirmed_pay_charges_nothing(db, ctx_for, sandbox):
    said = await pay_invoice(await ctx_for(), "INV-1002", "120.00")
    assert said == (
        f"You're about to pay $120.00 to {PAYEE} for invoice INV-1002. Shall I go ahead?"
    )
    partial = await pay_invoice(await ctx_for(key="k2"), "inv 1001", "100")
    assert "That leaves $258.40 open on it." in partial
    assert await payment_rows(db) == []
    assert sandbox.calls == 0
    assert await balance(db) == Decimal("525.15")


async def test_confirmed_pay_charges_once(db, ctx_for, sandbox):
    said = await pay_invoice(await ctx_for(), "INV-1002", "120.00", confirmed=True)
    assert said.startswith(f"Done: I paid $120.00 to {PAYEE} for invoice INV-1002.")
    assert sandbox.calls == 1
    assert await balance(db) == Decimal("405.15")
    [row] = await payment_rows(db)
    assert (row.kind, row.status, row.amount, row.idempotency_key) == (
        "charge",
        "succeeded",
        Decimal("120.00"),
        "k1",
    )
    assert row.gateway_ref.startswith("sbx_ch_") and row.id in said
    account = await ledger.get_account(db, "alice")
    assert (await ledger.find_invoice(db, account.id, "INV-1002")).status == "paid"


async def test_first_attempt_charges_under_the_full_key_without_asking_find(db, ctx_for):
    gw = RecordingGateway()
    key = "0f3c9a1be27d4c55a8e1f0b2c3d4e5f6.1767225600"  # as a call's stable key looks
    await pay_invoice(await ctx_for(key=key, hook=hook_with(gw)), "INV-1002", "120", confirmed=True)
    assert gw.log == [("charge", key)]  # a fresh reservation has nothing to reconcile
    [row] = await payment_rows(db)
    assert row.idempotency_key == key and row.gateway_ref == gw.seen[key]


async def test_same_key_twice_is_one_payment_with_the_same_answer(db, ctx_for):
    gw = RecordingGateway()
    hook = hook_with(gw)
    first = await pay_invoice(await ctx_for(hook=hook), "INV-1001", "$358.40", confirmed=True)
    again = await pay_invoice(await ctx_for(hook=hook), "INV-1001", "$358.40", confirmed=True)
    assert first == again
    assert len(await payment_rows(db)) == 1
    assert gw.log == [("charge", "k1")]  # the second answer came from the ledger alone
    assert await balance(db) == Decimal("166.75")


async def test_crash_after_gateway_charge_then_retry_reconciles_through_find(db, ctx_for):
    gw = RecordingGateway(lose_answers=1)
    hook = hook_with(gw)
    with pytest.raises(ToolError, match="(?i)nothing will be charged twice"):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    [row] = await payment_rows(db)
    assert row.status == "pending"  # the key was persisted before the side effect
    assert await balance(db) == Decimal("525.15")

    said = await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    assert said.startswith("Done: I paid $120.00")
    # The retry asked the gateway about the key and did not charge again.
    assert gw.log == [("charge", "k1"), ("find", "k1")]
    assert gw.moved == [("charge", "k1", Decimal("120.00"))]
    [row] = await payment_rows(db)
    assert row.status == "succeeded" and row.gateway_ref == gw.seen["k1"]
    assert await balance(db) == Decimal("405.15")


async def test_crash_between_charge_and_ledger_write_then_retry(db, ctx_for, monkeypatch):
    gw = RecordingGateway()
    hook = hook_with(gw)
    real_complete = ledger.complete

    async def die(*args, **kwargs):
        raise OSError("store gone")  # as if the store died after the charge

    monkeypatch.setattr(ledger, "complete", die)
    # Money may have moved: the caller hears it is being confirmed, not a generic sorry.
    with pytest.raises(ToolError, match="being confirmed.*nothing will be charged twice"):
        await pay_invoice(await ctx_for(hook=hook), "INV-1003", "46.75", confirmed=True)
    monkeypatch.setattr(ledger, "complete", real_complete)
    await pay_invoice(await ctx_for(hook=hook), "INV-1003", "46.75", confirmed=True)
    rows = await payment_rows(db)
    assert [(r.status, r.idempotency_key) for r in rows] == [("succeeded", "k1")]
    assert gw.log == [("charge", "k1"), ("find", "k1")]
    assert len(gw.moved) == 1
    assert await balance(db) == Decimal("478.40")


async def test_gateway_down_before_charging_then_retry(db, ctx_for):
    gw = RecordingGateway(fail_before=1)
    hook = hook_with(gw)
    with pytest.raises(ToolError):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    assert gw.moved == []
    await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    # The retry found nothing under the key, so it charged, under the same key, once.
    assert gw.log == [("charge", "k1"), ("find", "k1"), ("charge", "k1")]
    assert gw.moved == [("charge", "k1", Decimal("120.00"))] and len(await payment_rows(db)) == 1


async def test_reconcile_payment_completes_or_voids_pending_rows(db, ctx_for, config):
    gw = RecordingGateway(lose_answers=1)
    hook = hook_with(gw)
    with pytest.raises(ToolError):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    done = await billing.reconcile_payment(db, "k1", hook, config)
    assert done.status == "succeeded" and await balance(db) == Decimal("405.15")
    assert gw.log == [("charge", "k1"), ("find", "k1")]

    account = await ledger.get_account(db, "alice")
    pay, created = await ledger.reserve_charge(db, account, "INV-1003", Decimal("10"), "k9")
    assert created and pay.status == "pending"  # reserved, then the process died before charging
    voided = await billing.reconcile_payment(db, "k9", hook, config)
    assert voided.status == "failed" and await balance(db) == Decimal("405.15")
    assert await billing.reconcile_payment(db, "unknown", hook, config) is None
    assert gw.log[2:] == [("find", "k9")]  # "unknown" has no row: the gateway is not asked
    # The same logical call retried later charges then, once.
    await pay_invoice(await ctx_for(key="k9", hook=hook), "INV-1003", "10", confirmed=True)
    assert gw.log[3:] == [("find", "k9"), ("charge", "k9")]
    assert len(gw.moved) == 2 and await balance(db) == Decimal("395.15")


async def test_declined_charge_fails_the_row_and_can_be_retried(db, ctx_for):
    class Declining(RecordingGateway):
        declines = 1

        async def charge(self, account, amount, idempotency_key):
            if self.declines:
                self.declines -= 1
                self.log.append(("charge", idempotency_key))
                raise PaymentDeclined("Your card was declined.")
            return await super().charge(account, amount, idempotency_key)

    gw = Declining()
    hook = hook_with(gw)
    with pytest.raises(ToolError, match="Your card was declined."):
        await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    [row] = await payment_rows(db)
    assert row.status == "failed" and await balance(db) == Decimal("525.15")
    await pay_invoice(await ctx_for(hook=hook), "INV-1002", "120", confirmed=True)
    [row] = await payment_rows(db)
    assert row.status == "succeeded" and await balance(db) == Decimal("405.15")
    assert gw.log == [("charge", "k1"), ("find", "k1"), ("charge", "k1")]


async def test_partial_payments_then_over_the_rest_is_refused(db, ctx_for):
    await pay_invoice(await ctx_for(key="a"), "INV-1001", "300", confirmed=True)
    account = await ledger.get_account(db, "alice")
    inv = await ledger.find_invoice(db, account.id, "INV-1001")
    assert (inv.status, inv.open_amount) == ("open", Decimal("58.40"))
    with pytest.raises(ToolError, match=r"more than the \$58.40 still open on invoice INV-1001"):
        await pay_invoice(await ctx_for(key="b"), "INV-1001", "58.41", confirmed=True)
    await pay_invoice(await ctx_for(key="c"), "INV-1001", "58.40", confirmed=True)
    assert (await ledger.find_invoice(db, account.id, "INV-1001")).status == "paid"
    assert await balance(db) == Decimal("166.75")


async def test_racing_payments_for_one_invoice_charge_it_once(db, ctx_for):
    gw = RecordingGateway()
    hook = hook_with(gw)
    ctxs = [await ctx_for(key=f"race{i}", hook=hook) for i in range(4)]
    results = await asyncio.gather(
        *(pay_invoice(c, "INV-1002", "120", confirmed=True) for c in ctxs), return_exceptions=True
    )
    assert sum(isinstance(r, str) for r in results) == 1
    refused = [r for r in results if isinstance(r, ToolError)]
    assert len(refused) == 3
    # A loser that came while the winner's charge was under way hears that it is being
    # confirmed; one that came after hears it is paid. Either way nothing more is charged.
    assert all(
        str(r) == "Invoice INV-1002 is already paid." or "being confirmed" in str(r)
        for r in refused
    )
    [winner] = [c.idempotency_key for c, r in zip(ctxs, results, strict=True) if isinstance(r, str)]
    assert gw.log == [("charge", winner)] and await balance(db) == Decimal("405.15")


async def test_key_reused_for_different_details_is_refused(db, ctx_for):
    await pay_invoice(await ctx_for(), "INV-1002", "20", confirmed=True)
    with pytest.raises(ToolError, match="doesn't match the earlier request"):
        await pay_invoice(await ctx_for(), "INV-1002", "30", confirmed=True)
    assert len(await payment_rows(db)) == 1


async def test_a_real_call_hands_the_gateway_its_full_stable_key(store, settings, monkeypatch):
    """Through the call side (run_tool), not a hand-made context: the key the gateway gets is
    the task row's whole stable key, the same on a retry of the same logical call."""
    from livekit.agents import llm

    from frontdesk.agents.patterns import _digest, run_tool
    from frontdesk.agents.runtime import CallRuntime

    gw = RecordingGateway(lose_answers=1)

    class GatewayPlugin:
        @hookimpl
        def frontdesk_payment_gateway(self, config):
            return gw

    monkeypatch.setenv("FRONTDESK_BILLING_SEED_INVOICES", str(DEMO_SEED))
    registry = host.load(settings, extra=[("gw", GatewayPlugin())])
    runtime = CallRuntime(None, store=store, registry=registry, settings=settings, caller="ida")  # type: ignore[arg-type]
    args = {"invoice_id": "INV-1002", "amount": "120", "confirmed": True}
    spec = registry.tools["pay_invoice"]
    with pytest.raises(llm.ToolError, match="(?i)nothing will be charged twice"):
        await run_tool(spec, runtime, "billing", dict(args), None)
    said = await run_tool(spec, runtime, "billing", dict(args), None)
    assert str(said).startswith("Done: I paid $120.00")
    rows = sorted(await store.list(caller="ida", tool="pay_invoice"), key=lambda t: t.id)
    key = rows[0].idempotency_key
    digest = _digest("ida", "pay_invoice", spec.validate(dict(args)))
    assert key.startswith(f"{digest}.") and len(key) > len(digest) + 1
    assert all(r.idempotency_key.split("#", 1)[0] == key for r in rows)
    assert gw.log == [("charge", key), ("find", key)]  # whole key, both times
    [payment] = await payment_rows(Database(store))
    assert payment.idempotency_key == key and payment.status == "succeeded"


# -- bad input ------------------------------------------------------------------------------


async def test_unknown_and_other_callers_invoice_are_not_found(db, ctx_for, config):
    await ledger.ensure_account(db, "bob", config.seeds())  # owns INV-1001..1003
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
    assert await payment_rows(db) == []


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
async def test_bad_amounts_are_refused_and_charge_nothing(db, ctx_for, sandbox, amount, message):
    for confirmed in (False, True):
        with pytest.raises(ToolError, match=message.replace("$", r"\$")):
            await pay_invoice(await ctx_for(), "INV-1002", amount, confirmed=confirmed)
    assert await payment_rows(db) == [] and sandbox.calls == 0


@pytest.mark.parametrize(
    ("raw", "exact"),
    [("120", "120.00"), ("$1,200.50", "1200.50"), ("45 dollars", "45.00"), (" 7.5 USD", "7.50"),
     (120, "120.00"), (120.1, "120.10"), ("0.10", "0.10"), (".5", "0.50"), ("120.100", "120.10")],
)  # fmt: skip
def test_parse_amount_is_exact(raw, exact):
    value = money.parse_amount(raw)
    assert isinstance(value, Decimal) and value == Decimal(exact) and str(value) == exact


# -- refunds --------------------------------------------------------------------------------


async def test_refund_confirms_then_refunds_once(db, ctx_for):
    gw = RecordingGateway()
    hook = hook_with(gw)
    paid = await pay_invoice(await ctx_for(key="p", hook=hook), "INV-1002", "120", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    ask = await refund(await ctx_for(key="r0", tool="refund", hook=hook), payment_id.lower())
    assert ask == (
        f"You're about to get a refund of $120.00 from {PAYEE} for payment "
        f"{payment_id} on invoice INV-1002. Shall I go ahead?"
    )
    assert len(await payment_rows(db)) == 1
    done = await refund(
        await ctx_for(key="r1", tool="refund", hook=hook), payment_id, confirmed=True
    )
    assert done.startswith(
        f"Done: $120.00 from payment {payment_id} is refunded on invoice INV-1002."
    )
    again = await refund(
        await ctx_for(key="r1", tool="refund", hook=hook), payment_id, confirmed=True
    )
    assert again == done
    assert gw.log == [("charge", "p"), ("refund", "r1")]  # one charge, one refund, no repeats
    assert await balance(db) == Decimal("525.15")
    account = await ledger.get_account(db, "alice")
    assert (await ledger.find_invoice(db, account.id, "INV-1002")).status == "open"
    refunds = [r for r in await payment_rows(db) if r.kind == "refund"]
    assert [(r.refunded_payment_id, r.status, r.amount) for r in refunds] == [
        (payment_id, "succeeded", Decimal("120.00"))
    ]


async def test_a_refund_whose_answer_was_lost_is_reconciled_not_repeated(db, ctx_for):
    gw = RecordingGateway()
    hook = hook_with(gw)
    paid = await pay_invoice(await ctx_for(key="p", hook=hook), "INV-1003", "46.75", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    gw.lose_answers = 1
    with pytest.raises(ToolError, match="nothing will be refunded twice"):
        await refund(await ctx_for(key="r", tool="refund", hook=hook), payment_id, confirmed=True)
    await refund(await ctx_for(key="r", tool="refund", hook=hook), payment_id, confirmed=True)
    assert gw.log == [("charge", "p"), ("refund", "r"), ("find", "r")]
    assert [op for op, _, _ in gw.moved] == ["charge", "refund"]
    assert await balance(db) == Decimal("525.15")


async def test_double_refund_is_refused(db, ctx_for, sandbox):
    paid = await pay_invoice(await ctx_for(key="p"), "INV-1003", "46.75", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    await refund(await ctx_for(key="r1", tool="refund"), payment_id, confirmed=True)
    for confirmed in (False, True):
        with pytest.raises(ToolError, match=f"Payment {payment_id} has already been refunded."):
            await refund(await ctx_for(key="r2", tool="refund"), payment_id, confirmed=confirmed)
    assert sandbox.calls == 2 and len(await payment_rows(db)) == 2


async def test_unknown_or_other_callers_payment_cannot_be_refunded(db, ctx_for):
    paid = await pay_invoice(
        await ctx_for(caller="bob", key="b"), "INV-1002", "120", confirmed=True
    )
    bobs = paid.rsplit(" ", 1)[-1].rstrip(".")
    for payment_id in (bobs, "PAY-NOPE12", "", "INV-1002"):
        with pytest.raises(ToolError, match="I couldn't find that payment on your account."):
            await refund(await ctx_for(key="e", tool="refund"), payment_id, confirmed=True)
    assert len(await payment_rows(db)) == 1


# -- the hooks and the plugin host ----------------------------------------------------------


async def test_hook_frontdesk_payment_gateway(store, ctx_for, sandbox, monkeypatch):
    """``frontdesk_payment_gateway(config)``: called with billing's own settings before money
    moves; the first non-None answer is the gateway, None leaves the sandbox, garbage or an
    exception charges nothing."""
    seen: list[object] = []
    mine = RecordingGateway()

    class GatewayPlugin:
        @hookimpl
        def frontdesk_payment_gateway(self, config):
            seen.append(config)
            return mine

    class Abstains:
        @hookimpl
        def frontdesk_payment_gateway(self, config):
            return None

    monkeypatch.setenv("FRONTDESK_BILLING_SANDBOX_SECONDS", "0.01")
    monkeypatch.setenv("FRONTDESK_BILLING_SEED_INVOICES", str(DEMO_SEED))
    registry = host.load(
        Settings(load_plugins=""), extra=[("none", Abstains()), ("gw", GatewayPlugin())]
    )
    assert registry.plugins["gw"].errors == [] and registry.plugins["none"].errors == []
    config = registry.configs["billing"]
    assert isinstance(config, BillingSettings) and config.sandbox_seconds == 0.01
    ctx = await ctx_for(hook=registry.pm.hook, config=config)
    await pay_invoice(ctx, "INV-1002", "120", confirmed=True)
    assert seen == [config]  # billing's settings, not core's
    assert mine.log == [("charge", "k1")] and sandbox.calls == 0

    # Only abstaining plugins: the sandbox, with billing's latency.
    assert gateway.gateway_for(hook_with(None), config) is sandbox and sandbox.latency == 0.01
    # Something that is not a gateway, or a hook that raises: nothing is charged.
    with pytest.raises(ToolError, match="nothing was charged"):
        await pay_invoice(
            await ctx_for(key="k2", hook=hook_with(object())), "INV-1003", "1", confirmed=True
        )

    class Raises:
        @hookimpl
        def frontdesk_payment_gateway(self, config):
            raise RuntimeError("no credentials")

    pm = pluggy.PluginManager("frontdesk")
    pm.add_hookspecs(billing.frontdesk_hookspecs)
    pm.register(Raises())
    with pytest.raises(ToolError, match="nothing was charged"):
        await pay_invoice(await ctx_for(key="k3", hook=pm.hook), "INV-1003", "1", confirmed=True)
    assert sandbox.calls == 0 and len(await payment_rows(Database(store))) == 1
    doc = billing.BillingSpecs.frontdesk_payment_gateway.__doc__
    assert doc and "find(idempotency_key)" in doc and "frontdesk_payment_gateway(config)" in doc


async def test_hook_billing_statement(store, db, ctx_for, config):
    """``billing_statement(caller, database, start, end)``: billing answers (async) the
    caller's invoices and payments in the period, in date order, failed payments left out,
    with the balance today; None for a caller with no account."""
    from datetime import datetime, timedelta, timezone

    registry = host.load(Settings(load_plugins=""))
    hook = registry.pm.hook
    now = datetime.now(timezone.utc)
    start, end = now - timedelta(days=1), now + timedelta(days=1)

    async def ask(caller, start=start, end=end):
        return await hook.billing_statement(caller=caller, database=db, start=start, end=end)

    assert await ask("nobody") is None
    paid = await pay_invoice(await ctx_for(key="p"), "INV-1002", "120", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    declining = RecordingGateway(fail_before=0)

    async def decline(account, amount, idempotency_key):
        raise PaymentDeclined("No.")

    declining.charge = decline
    with pytest.raises(ToolError):
        await pay_invoice(
            await ctx_for(key="x", hook=hook_with(declining)), "INV-1003", "1", confirmed=True
        )
    await ledger.ensure_account(db, "bob", config.seeds())  # another caller stays out

    answer = await ask("alice")
    assert answer["currency"] == "USD" and answer["balance"] == Decimal("405.15")
    lines = answer["lines"]
    assert [(ln["type"], ln["reference"], ln["status"]) for ln in lines] == [
        ("invoice", "INV-1001", "open"), ("invoice", "INV-1002", "paid"),
        ("invoice", "INV-1003", "open"), ("payment", payment_id, "succeeded"),
    ]  # fmt: skip
    assert lines[3] == {
        "date": lines[3]["date"], "type": "payment", "reference": payment_id,
        "invoice": "INV-1002", "description": f"paid to {PAYEE}",
        "amount": Decimal("120.00"), "status": "succeeded",
    }  # fmt: skip
    assert all(isinstance(ln["amount"], Decimal) for ln in lines)
    assert [ln["date"] for ln in lines] == sorted(ln["date"] for ln in lines)
    # Outside the period: the account, and nothing in it.
    earlier = await ask("alice", start=now - timedelta(days=60), end=now - timedelta(days=30))
    assert earlier["lines"] == [] and earlier["balance"] == Decimal("405.15")
    doc = billing.BillingSpecs.billing_statement.__doc__
    assert doc and "billing_statement(caller, database, start, end)" in doc


def test_host_registers_billing_its_settings_migrations_and_hookspecs():
    registry = host.load(Settings(load_plugins=""))
    info = registry.plugins["billing"]
    assert info.errors == []
    assert {"register_settings", "register_migrations", "billing_statement"} <= set(info.hooks)
    assert registry.migrations["billing"] == billing.MIGRATIONS
    assert isinstance(registry.configs["billing"], BillingSettings)
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
    assert "hotel" not in dept.instructions.lower()
    # The LLM may send the amount as a string or a number; both validate.
    spec = billing.pay_invoice
    # amounts are spelled one way (the idempotency key hashes them): exact text, cents kept
    assert spec.validate({"invoice_id": "INV-1", "amount": 12.5})["amount"] == "12.50"
    assert (
        spec.validate('{"invoice_id": "INV-1", "amount": "12.50", "confirmed": true}')["confirmed"]
        is True
    )


def test_billing_imports_only_the_public_core_and_its_own_package():
    import ast

    allowed = ("frontdesk.core", "sqlalchemy", "pydantic", "pydantic_settings", "alembic")
    for path in (ROOT / "plugins" / "billing").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("frontdesk"):
                    assert name == "frontdesk.core", (path, name)
                else:
                    top = name.split(".")[0]
                    assert top in {a.split(".")[0] for a in allowed} or top in _STDLIB, (path, name)


_STDLIB = {
    "__future__", "asyncio", "collections", "contextlib", "dataclasses", "datetime", "decimal", "functools",
    "hashlib", "json", "logging", "math", "os", "pathlib", "re", "secrets", "tomllib", "tomli",
    "typing",
}  # fmt: skip


async def test_amount_sums_stay_exact_over_many_cents(db, ctx_for):
    # 46.75 paid as 0.01 + ... would drift as floats; ten payments of 4.67 plus 0.05 must not.
    for i in range(10):
        await pay_invoice(await ctx_for(key=f"c{i}"), "INV-1003", "4.67", confirmed=True)
    await pay_invoice(await ctx_for(key="last"), "INV-1003", "0.05", confirmed=True)
    assert await balance(db) == Decimal("478.40")
    account = await ledger.get_account(db, "alice")
    assert (await ledger.find_invoice(db, account.id, "INV-1003")).status == "paid"
    async with db.read() as conn:
        count = (await conn.execute(select(func.count()).select_from(ledger.payments_t))).scalar()
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


# -- doctor: the sandbox and the seed invoices said out loud --------------------------------


def doctor_json(monkeypatch, tmp_path, **env) -> dict:
    """`frontdesk doctor --json` in an empty folder, through typer's CliRunner."""
    import json

    import typer
    from typer.testing import CliRunner

    from frontdesk.agents.programs import cli_voice

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FRONTDESK_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/doctor.db")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = typer.Typer()
    cli_voice.register(app)
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


def billing_rows(report: dict) -> list[tuple[str, str]]:
    return [
        (r["status"], r["detail"]) for r in report["sections"]["plugins"] if r["item"] == "billing"
    ]


def test_doctor_warns_that_payments_go_to_the_sandbox(monkeypatch, tmp_path, no_network):
    monkeypatch.delenv("FRONTDESK_PROFILE", raising=False)
    monkeypatch.delenv("FRONTDESK_BILLING_SEED_INVOICES", raising=False)
    report = doctor_json(monkeypatch, tmp_path)
    assert billing_rows(report) == [("warn", billing.SANDBOX_WARNING)]
    assert billing.SANDBOX_WARNING == (
        "payments go to the sandbox gateway: no money moves "
        "(install a gateway plugin, see docs/deploy.md)"
    )
    assert not (tmp_path / "doctor.db").exists()  # doctor looks, it does not create


def test_doctor_says_the_demo_profile_seeds_invoices(monkeypatch, tmp_path, no_network):
    report = doctor_json(
        monkeypatch, tmp_path, FRONTDESK_PROFILE=str(ROOT / "examples" / "demo" / "frontdesk.toml")
    )
    assert billing_rows(report) == [
        ("warn", billing.SANDBOX_WARNING),
        (
            "info",
            f"demo invoices are seeded: every new account opens with 3 invoices from {DEMO_SEED} "
            "(seed_invoices); a deployment starts with an empty ledger",
        ),
    ]


def test_doctor_names_a_plugged_in_gateway_and_its_failures(tmp_path):
    from frontdesk.core.plugin_extras import Check, doctor_checks

    class Stripeish:
        async def charge(self, account, amount, idempotency_key): ...
        async def refund(self, payment_ref, amount, idempotency_key): ...
        async def find(self, idempotency_key): ...

    def rows(answer, **billing_env) -> list[Check]:
        class GatewayPlugin:
            @hookimpl
            def frontdesk_payment_gateway(self, config):
                if isinstance(answer, Exception):
                    raise answer
                return answer

        registry = host.load(Settings(load_plugins=""), extra=[("gw", GatewayPlugin())])
        # conftest seeds the demo invoices for every test; here only when asked
        registry.configs["billing"] = BillingSettings(**{"seed_invoices": None, **billing_env})
        return [c for c in doctor_checks(registry) if c.plugin == "billing"]

    name = f"{Stripeish.__module__}.{Stripeish.__qualname__}"
    assert rows(Stripeish()) == [Check("billing", "ok", f"payments go through {name}")]
    assert rows(None) == [Check("billing", "warn", billing.SANDBOX_WARNING)]  # it passed
    assert rows(RuntimeError("no API key")) == [Check(
        "billing", "error",
        "the payment gateway plugin failed: RuntimeError('no API key'); payments will be refused",
    )]  # fmt: skip
    assert rows(object())[0].status == "error"
    # Demo invoices against a real gateway would charge real money: a warning, not a note.
    seeded = rows(Stripeish(), seed_invoices=DEMO_SEED)
    assert [c.status for c in seeded] == ["ok", "warn"]
    assert seeded[1].message.startswith("demo invoices are seeded: every new account opens with 3")
