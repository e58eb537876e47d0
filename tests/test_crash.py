"""Crash tests: real frontdesk processes SIGKILLed mid-task, then a restart and a reconnect.

Each test kills a subprocess at one point (during a background job, between a payment's
gateway charge and its ledger write, during an interruptible search), then brings the system
back the way an operator would (a runner starts, the caller calls back) and checks the store:
nothing left ``running`` with an expired lease, the job completed or failed with the caller
told, and exactly one charge per payment key. Leases are 1 s so recovery is quick.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import crashkit

from frontdesk.core.scenario import parse_scenario
from frontdesk.core.settings import Settings
from frontdesk.core.simulate import simulate
from frontdesk.db.store import TaskStore

TO_LAB = {"user": "the lab please", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]}
TO_BILLING = {
    "user": "billing please",
    "llm": [{"tools": [{"transfer_to_billing": {}}]}, {"say": "Billing here."}],
}
PAY = {"invoice_id": "INV-1001", "amount": "358.40", "confirmed": True}
PAY_TURN = {
    "user": "yes, pay invoice 1001 in full",
    "llm": [{"tools": [{"pay_invoice": PAY}]}, {"say": "Paid."}],
}


def call_back(settings: Settings, caller: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The caller's next call, in this process, with an embedded runner (a restarted worker);
    returns the transcript after asserting every expect passed."""
    events: list[dict[str, Any]] = []
    scenario = parse_scenario({"caller": caller, "steps": steps})
    registry = crashkit.load_registry(settings)
    failures = asyncio.run(simulate([scenario], settings, registry, events.append))
    assert failures == [], failures
    return events


def store_rows(url: str, caller: str) -> list[Any]:
    async def read() -> list[Any]:
        store = await TaskStore.open(url)
        try:
            return await store.list(caller=caller, limit=None)
        finally:
            await store.close()

    return asyncio.run(read())


def events_of(url: str, task_id: int) -> list[str]:
    return [
        n or ""
        for (n,) in crashkit.query(
            url, "SELECT note FROM task_events WHERE task_id = ? ORDER BY id", task_id
        )
    ]


def assert_nothing_left_running(url: str) -> None:
    assert crashkit.running_with_expired_lease(url) == []
    assert crashkit.query(url, "SELECT id, tool FROM tasks WHERE status = 'running'") == []


def test_runner_killed_during_a_job_is_requeued_completed_and_delivered(settings, tmp_path):
    url = settings.database_url

    async def queue() -> int:
        store = await TaskStore.open(url)
        try:  # exactly the row a call's background tool writes
            job = await store.create(
                caller="ada", tool="experiment", pattern="background", department="lab",
                plugin="kit", args={"name": "crash", "seconds": 2.0}, note="queued for the runner",
            )  # fmt: skip
            return job.id
        finally:
            await store.close()

    job_id = asyncio.run(queue())
    runner = crashkit.start("runner", "--db", url)
    try:
        crashkit.wait_until(
            lambda: crashkit.query(
                url, "SELECT 1 FROM tasks WHERE id = ? AND progress >= 0.5", job_id
            ),
            timeout=30,
            proc=runner,
        )
    finally:
        crashkit.kill(runner)
    [(status, attempts, owner)] = crashkit.query(
        url, "SELECT status, attempts, lease_owner FROM tasks WHERE id = ?", job_id
    )
    assert (status, attempts) == ("running", 1) and f":{runner.pid}:" in owner

    # A new runner (embedded in the caller's next call) re-queues it once the lease expires,
    # runs it again, and the result is spoken on the reconnect.
    transcript = call_back(
        settings,
        "ada",
        [
            {"wait": {"task": "experiment", "status": "succeeded", "timeout": 30}},
            {"wait": {"seconds": 0.5}},
            {"expect": {"task": "experiment", "delivered": True}},
            {"expect": {"said": "Experiment crash finished"}},
        ],
    )
    [job] = store_rows(url, "ada")
    assert job.status == "succeeded" and job.attempts == 2 and job.delivered_at is not None
    notes = events_of(url, job_id)
    assert any(n.startswith("lease expired (runner:") and f":{runner.pid}:" in n for n in notes)
    claims = [n for n in notes if n.startswith("claimed by")]
    assert (
        len(claims) == 2 and f":{runner.pid}:" in claims[0] and f":{runner.pid}:" not in claims[1]
    )
    assert any(e["type"] == "followup" and e["task_id"] == job_id for e in transcript)
    assert_nothing_left_running(url)


def test_killed_between_charge_and_ledger_write_charges_once_after_retry(
    settings, tmp_path, monkeypatch
):
    url = settings.database_url
    gateway_log = tmp_path / "gateway.jsonl"
    charged = tmp_path / "charged"
    scenario = crashkit.write_scenario(tmp_path / "pay.yaml", "bea", [TO_BILLING, PAY_TURN])
    call = crashkit.start(
        "simulate", str(scenario), "--json", "--db", url,
        **{crashkit.GATEWAY_LOG: str(gateway_log), crashkit.CRASH_AFTER_CHARGE: str(charged)},
    )  # fmt: skip
    try:
        crashkit.wait_until(charged.exists, timeout=40, proc=call)
    finally:
        crashkit.kill(call)  # money has moved; the ledger and the task row have not caught up
    [(key, status)] = crashkit.query(url, "SELECT idempotency_key, status FROM payments")
    assert status == "pending"
    assert crashkit.query(url, "SELECT status FROM tasks WHERE tool = 'pay_invoice'") == [
        ("running",)
    ]
    # The caller calls back once the dead call's lease has run out, and asks again.
    crashkit.wait_until(lambda: crashkit.running_with_expired_lease(url), timeout=10)
    monkeypatch.setenv(crashkit.GATEWAY_LOG, str(gateway_log))
    monkeypatch.delenv(crashkit.CRASH_AFTER_CHARGE, raising=False)
    transcript = call_back(
        settings,
        "bea",
        [TO_BILLING, PAY_TURN, {"expect": {"task": "pay_invoice", "status": "succeeded"}}],
    )
    outputs = [
        e["output"] for e in transcript if e["type"] == "tool_output" and e["name"] == "pay_invoice"
    ]
    assert outputs and outputs[-1].startswith("Done: I paid $358.40")

    payments = crashkit.query(
        url, "SELECT idempotency_key, status, gateway_ref, amount FROM payments"
    )
    assert len(payments) == 1 and payments[0][:2] == (key, "succeeded")
    ops = [(e["op"], e["key"]) for e in crashkit.FileGateway(gateway_log).entries()]
    assert ops.count(("charge", key)) == 1  # money moved once
    assert ("charge-repeat", key) not in ops and ("find", key) in ops  # reconciled, not re-sent
    [(balance,)] = crashkit.query(url, "SELECT balance FROM accounts WHERE caller = 'bea'")
    assert Decimal(str(balance)).quantize(Decimal("0.01")) == Decimal("166.75")
    assert crashkit.query(url, "SELECT status FROM invoices WHERE id = 'INV-1001'") == [("paid",)]
    rows = sorted(store_rows(url, "bea"), key=lambda t: t.id)
    pays = [t for t in rows if t.tool == "pay_invoice"]
    assert [t.status for t in pays] == ["failed", "succeeded"]
    assert pays[0].error == "interrupted by restart" and pays[0].delivered_at is not None
    assert pays[1].idempotency_key.split("#")[0] == pays[0].idempotency_key.split("#")[0] == key
    assert_nothing_left_running(url)


def test_call_killed_during_a_search_is_closed_and_the_caller_told(settings, tmp_path):
    url = settings.database_url
    scenario = crashkit.write_scenario(
        tmp_path / "search.yaml",
        "cy",
        [
            TO_LAB,
            {
                "user": "look up argon",
                "llm": [{"tools": [{"lookup": {"query": "argon", "seconds": 60}}]}, {"say": "x"}],
            },
        ],
    )
    call = crashkit.start("simulate", str(scenario), "--json", "--db", url)
    try:
        crashkit.wait_until(
            lambda: crashkit.query(
                url, "SELECT id FROM tasks WHERE tool = 'lookup' AND status = 'running'"
            ),
            timeout=40,
            proc=call,
        )
    finally:
        crashkit.kill(call)
    [(task_id, owner)] = crashkit.query(
        url, "SELECT id, lease_owner FROM tasks WHERE tool = 'lookup'"
    )
    assert owner.startswith(f"call:{call.pid}:")
    transcript = call_back(
        settings,
        "cy",
        [
            {"wait": {"task": "lookup", "status": "failed", "timeout": 20}},
            {"wait": {"seconds": 0.5}},
            {"expect": {"task": "lookup", "delivered": True}},
            {"expect": {"said": "did not complete"}},
        ],
    )
    [row] = [t for t in store_rows(url, "cy") if t.tool == "lookup"]
    assert row.status == "failed" and row.error == "interrupted by restart"
    assert any(
        n.startswith(f"interrupted by restart (call:{call.pid}:") for n in events_of(url, task_id)
    )
    assert any(e["type"] == "followup" and e["task_id"] == task_id for e in transcript)
    assert_nothing_left_running(url)


def test_crash_helpers_file_gateway_is_idempotent(tmp_path: Path):
    gateway = crashkit.FileGateway(tmp_path / "g.jsonl")
    first = asyncio.run(gateway.charge(None, Decimal("1.00"), "k"))
    assert asyncio.run(gateway.charge(None, Decimal("1.00"), "k")) == first
    assert asyncio.run(gateway.find("k")) == first and asyncio.run(gateway.find("x")) is None
    assert [e["op"] for e in gateway.entries()] == ["charge", "charge-repeat", "find", "find"]
