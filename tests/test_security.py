"""Security: callers are untrusted (docs/security.md).

- Caller isolation through every tool and RPC method, with guessed and enumerated ids: another
  caller's task, invoice or payment answers exactly as one that does not exist.
- Card numbers and CVVs said by a caller never reach task rows, task events or logs: a real
  billing call, then a scan of the database files' bytes and of every captured log record.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import kit
import pytest
from livekit import rtc
from livekit.agents import llm

from frontdesk.agents.patterns import run_tool
from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.agents.rpc import METHOD_CANCEL, METHOD_TASKS, TaskRpc
from frontdesk.agents.runtime import CallRuntime
from frontdesk.core import Database, ToolContext, hookimpl, host, tool
from frontdesk.core.schema import open_store
from frontdesk.db.models import utcnow
from frontdesk.plugins.billing import ledger

ROOT = Path(__file__).resolve().parent.parent

GUESSES: list[Any] = [0, -1, 2**31, 2**63, "1 OR 1=1", "1; DROP TABLE tasks", "9e9", None]


@pytest.fixture(autouse=True)
def _demo_invoices(monkeypatch):
    # Every new caller opens with the demo's three invoices (billing's seed_invoices), set
    # before any registry is built so billing's settings carry it.
    monkeypatch.setenv(
        "FRONTDESK_BILLING_SEED_INVOICES", str(ROOT / "examples" / "demo" / "invoices.toml")
    )
    monkeypatch.setenv("FRONTDESK_BILLING_PAYEE", "Harbor Light Hotel")


async def call_tool(store, registry, settings, caller: str, tool_name: str, **args: Any) -> str:
    """A tool as the LLM would call it for ``caller`` (no voice session needed)."""
    runtime = CallRuntime(None, store=store, registry=registry, settings=settings, caller=caller)  # type: ignore[arg-type]
    try:
        return str(await run_tool(registry.tools[tool_name], runtime, "security", args, None))
    except llm.ToolError as exc:
        return f"ERROR {exc.message}"


def same_answer(a: str, b: str) -> bool:
    """Equal once the reference number the caller said is blanked out."""
    return re.sub(r"-?\d+", "N", a) == re.sub(r"-?\d+", "N", b)


async def test_task_tools_never_reveal_or_touch_another_callers_tasks(store, registry, settings):
    theirs = [
        await store.create(caller="mallory", tool="experiment", pattern="background", args={"name": "m"}),
        await store.create(caller="mallory", tool="charge", pattern="critical", status="running"),
        await store.create(caller="mallory", tool="lookup", pattern="interruptible", status="running"),
    ]  # fmt: skip
    await store.transition(
        theirs[1].id, "succeeded", result="MALLORY-SECRET", delivered_at=utcnow()
    )
    mine = await store.create(
        caller="alice", tool="experiment", pattern="background", args={"name": "a"}
    )
    before = {t.id: (t.status, len(await store.events(t.id))) for t in theirs}
    listing = await call_tool(store, registry, settings, "alice", "my_tasks")
    assert f"reference {mine.id}" in listing
    assert not any(f"reference {t.id})" in listing for t in theirs)
    nowhere = await call_tool(store, registry, settings, "alice", "task_status", task_id=987654)
    assert nowhere.startswith("ERROR I couldn't find")
    top = max(t.id for t in theirs) + 5
    for guess in [*range(1, top), *GUESSES]:
        for name in ("task_status", "cancel_task"):
            out = await call_tool(store, registry, settings, "alice", name, task_id=guess)
            assert "MALLORY" not in out and "mallory" not in out
            if guess in before:  # enumerated: theirs looks exactly like nothing at all
                assert same_answer(out, nowhere), (name, guess, out)
    after = {t.id: (t.status, len(await store.events(t.id))) for t in theirs}
    assert after == before  # not cancelled, not even touched


async def test_billing_never_reveals_or_charges_another_callers_invoices(store, registry, settings):
    said = await call_tool(
        store, registry, settings, "mallory", "pay_invoice",
        invoice_id="INV-1002", amount="120.00", confirmed=True,
    )  # fmt: skip
    assert said.startswith("Done:")
    db = Database(store)
    payee = registry.configs["billing"].payee
    account = await ledger.get_account(db, "mallory")
    [payment] = await ledger.payments(db, account.id)
    mallory_invoices = {i.id for i in await ledger.invoices(db, account.id)}
    assert mallory_invoices == {"INV-1001", "INV-1002", "INV-1003"}
    before = (account.balance, len(await ledger.payments(db, account.id)))
    listing = await call_tool(store, registry, settings, "alice", "list_invoices")
    assert not any(i in listing for i in mallory_invoices)
    for invoice in [
        *(f"INV-{n}" for n in range(1000, 1012)), "1001", "inv 1002", "INV-1001' OR '1'='1", "%",
    ]:  # fmt: skip
        for confirmed in (False, True):
            out = await call_tool(
                store, registry, settings, "alice", "pay_invoice",
                invoice_id=invoice, amount="1.00", confirmed=confirmed,
            )  # fmt: skip
            owned = payee in out or out.startswith("Done:")
            if any(invoice.endswith(i[4:]) and not owned for i in mallory_invoices):
                assert out == f"ERROR {ledger.INVOICE_NOT_FOUND}", (invoice, out)
            assert "MALLORY" not in out.upper()
    for guess in [payment.id, payment.id.lower(), payment.id[4:], "PAY-AAAAAA", "PAY-%"]:
        for confirmed in (False, True):
            out = await call_tool(
                store, registry, settings, "alice", "refund", payment_id=guess, confirmed=confirmed
            )
            assert out == f"ERROR {ledger.PAYMENT_NOT_FOUND}", (guess, out)
    account = await ledger.get_account(db, "mallory")
    assert (account.balance, len(await ledger.payments(db, account.id))) == before


class StandIn:
    """The room's local participant, as far as TaskRpc's methods need it."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def register_rpc_method(self, name: str, handler: Any) -> None:
        self.handlers[name] = handler

    async def perform_rpc(self, **_: Any) -> str:
        return ""

    async def call(self, method: str, payload: Any, identity: str = "alice") -> Any:
        data = rtc.RpcInvocationData("r", identity, json.dumps(payload), 5.0, method)
        try:
            return json.loads(await self.handlers[method](data))
        except rtc.RpcError as exc:
            return exc.code, exc.message


async def test_rpc_methods_with_enumerated_ids(store):
    theirs = [
        (await store.create(caller="mallory", tool="experiment", pattern="background")).id
        for _ in range(3)
    ]
    local = StandIn()
    rpc = TaskRpc(local, store, "alice")
    rpc.register()
    for task_id in [*range(0, max(theirs) + 3), -1, 2**40]:
        code, message = await local.call(METHOD_CANCEL, {"task_id": task_id})
        assert (code, message) == (404, f"task {task_id} not found")
    assert (await local.call(METHOD_TASKS, {}))["tasks"] == []
    assert (await local.call(METHOD_TASKS, {}, identity="mallory"))[0] == 403
    assert {(await store.get(t)).status for t in theirs} == {"queued"}


# -- secrets and card data ------------------------------------------------------------------

CARD = "4111 1111 1111 1111"
CARD_FORMS = ("4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111")
CVV = "9183"


@tool(pattern="critical", sensitive=("cvv",))
async def verify_card(ctx: ToolContext, card_note: str, cvv: str) -> str:
    """Verify the caller's card before a payment."""
    return "The card is verified."


@tool(pattern="interruptible")
async def parse_note(ctx: ToolContext, text: str) -> str:
    """Read a note aloud (fails, quoting its input, as careless code does)."""
    raise ValueError(f"could not parse {text!r}")


@tool(pattern="background")
async def file_note(ctx: ToolContext, note: str) -> str:
    """File a note for later."""
    return "filed"


class Vault:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        for spec in (verify_card, parse_note, file_note):
            register(spec, departments=["billing"])


def leaks(text: str) -> list[str]:
    return [form for form in (*CARD_FORMS, f"cvv {CVV}", f'"{CVV}"', f"'{CVV}'") if form in text]


async def test_card_numbers_and_cvvs_never_reach_rows_events_or_logs(settings, tmp_path, caplog):
    registry = host.load(settings, extra=[("kit", kit), ("vault", Vault())])
    steps = [
        {"user": "billing please", "llm": [{"tools": [{"transfer_to_billing": {}}]}, {"say": "Billing."}]},
        {
            "user": f"my card is {CARD} and the cvv is {CVV}",
            "llm": [
                {
                    "tools": [
                        {"verify_card": {"card_note": f"card {CARD}, cvv {CVV}", "cvv": CVV}},
                        {"parse_note": {"text": f"card {CARD_FORMS[2]} cvv {CVV}"}},
                        {"file_note": {"note": f"charge {CARD_FORMS[0]}"}},
                        {"pay_invoice": {"invoice_id": f"INV-1001 {CARD}", "amount": "1.00"}},
                    ]
                },
                {"say": "Thanks, I never keep card details."},
            ],
        },
        {
            "user": "pay invoice 1001 in full",
            "llm": [
                {"tools": [{"pay_invoice": {"invoice_id": "INV-1001", "amount": "358.40", "confirmed": True}}]},
                {"say": "Paid."},
            ],
        },
        {"expect": {"task": "pay_invoice", "status": "succeeded"}},
    ]  # fmt: skip
    events: list[dict] = []
    with caplog.at_level(logging.DEBUG):
        failures = await simulate(
            [parse_scenario({"caller": "carla", "steps": steps})], settings, registry, events.append
        )
    assert failures == []
    outputs = {e["name"]: e for e in events if e["type"] == "tool_output"}
    assert outputs["verify_card"]["output"] == "The card is verified."
    assert outputs["file_note"]["is_error"] and "card numbers" in outputs["file_note"]["output"]
    assert outputs["parse_note"]["is_error"]

    store = await open_store(settings.database_url)
    try:
        rows = {t.tool: t for t in await store.list(caller="carla", limit=None)}
        assert rows["verify_card"].args == {
            "card_note": "card ****1111, cvv ***",
            "cvv": "[redacted]",
        }
        assert rows["file_note"].status == "failed" and "****1111" in json.dumps(
            rows["file_note"].args
        )
        assert re.fullmatch(
            r"internal error: ValueError \(ref [0-9a-f]{8}\)", rows["parse_note"].error
        )
        # Every text column of every row and event, as a whole.
        async with store.read_engine.connect() as conn:
            parts = []
            for table in ("tasks", "task_events", "calls", "payments", "invoices", "accounts"):
                parts += map(str, (await conn.exec_driver_sql(f"SELECT * FROM {table}")).all())
            # Free-text columns alone, where a bare 4-digit code cannot hide in a timestamp.
            texts = " ".join(
                str(r)
                for r in (
                    await conn.exec_driver_sql(
                        "SELECT args, result, error, progress_note FROM tasks "
                        "UNION ALL SELECT note, NULL, NULL, NULL FROM task_events"
                    )
                ).all()
            )
        dump = " ".join(parts)
    finally:
        await store.close()
    assert dump and leaks(dump) == [] and CVV not in texts
    # The bytes on disk, WAL and shared memory included (what a stolen file would give away).
    path = Path(settings.database_url.split(":///", 1)[1])
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if file.exists():
            data = file.read_bytes()
            assert not any(form.encode() in data for form in CARD_FORMS), file
    # Every log record, tracebacks included.
    text = caplog.text + " ".join(str(r.args) for r in caplog.records)
    assert caplog.records and leaks(text) == []
    assert "tool parse_note failed" in caplog.text and "****1111" in caplog.text


@pytest.mark.parametrize(
    "value", ["4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111"]
)
async def test_background_jobs_refuse_card_numbers_out_loud(store, registry, settings, value):
    out = await call_tool(store, registry, settings, "dan", "experiment", name=f"card {value}")
    assert out.startswith("ERROR For your security I can't take card numbers")
    [row] = await store.list(caller="dan")
    assert row.status == "failed" and value not in json.dumps(row.args)
