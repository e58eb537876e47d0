"""Crash tests: real frontdesk processes SIGKILLed mid-task, then a restart and a reconnect.

Each test kills a subprocess at one point (during a background job, between a payment's
gateway charge and its ledger write, during an interruptible search), then brings the system
back the way an operator would (a worker starts, the caller calls back) and checks the store:
nothing left ``running`` with an expired lease, the job completed or failed with the caller
told, and exactly one charge per payment key. Leases are 1 s so recovery is quick. The trials
themselves live in crashtrials.py, shared with bench/reliability.py.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import crashkit
import crashtrials

from frontdesk.core.schema import open_store


def notes(url: str, task_id: int) -> list[str]:
    rows = crashkit.query(
        url, "SELECT note FROM task_events WHERE task_id = ? ORDER BY id", task_id
    )
    return [n or "" for (n,) in rows]


def rows_of(url: str, caller: str) -> list:
    async def read() -> list:
        store = await open_store(url)
        try:
            return sorted(await store.list(caller=caller, limit=None), key=lambda t: t.id)
        finally:
            await store.close()

    return asyncio.run(read())


def assert_nothing_left_running(url: str) -> None:
    assert crashkit.running_with_expired_lease(url) == []
    assert crashkit.query(url, "SELECT id, tool FROM tasks WHERE status = 'running'") == []


def test_runner_killed_during_a_job_is_resumed_completed_and_delivered(db_url, tmp_path):
    out = crashtrials.runner_killed_mid_job(db_url, tmp_path)
    assert out.details["failures"] == []
    assert (out.kills, out.rows, out.lost, out.doubled) == (1, 1, 0, 0)
    assert out.details["running_at_kill"] == 1
    [job] = rows_of(db_url, "job0")
    assert job.status == "succeeded" and job.attempts == 2 and job.delivered_at is not None
    # The restarted worker's runner took the dead runner's executor id back (a host slot
    # whose process is gone), so DBOS resumed the job at its launch, not after the bound.
    starts = [n for n in notes(db_url, job.id) if n.startswith("started by runner ")]
    assert len(starts) == 2 and starts[0] == starts[1]
    assert any(e["type"] == "followup" and e["task_id"] == job.id for e in out.transcript)
    spoken = [e["text"] for e in out.transcript if e["type"] == "agent"]
    assert any("Experiment crash-job0 finished" in s for s in spoken)
    assert_nothing_left_running(db_url)


def test_killed_between_charge_and_ledger_write_charges_once_after_retry(db_url, tmp_path):
    out = crashtrials.payment_killed(db_url, tmp_path, after_charge=True)
    assert out.details["failures"] == []
    assert out.details["payment_at_kill"] == "pending"  # money moved, ledger not caught up
    assert (out.kills, out.rows, out.lost, out.doubled) == (1, 1, 0, 0)
    key = out.details["key"]
    assert out.details["charges"] == {key: 1}  # one charge at the gateway for the key
    assert out.details["ops"].count("charge") == 1 and "charge-repeat" not in out.details["ops"]
    assert "find" in out.details["ops"]  # the retry reconciled through the gateway
    assert out.details["balance"] == "166.75"
    assert crashkit.query(db_url, "SELECT status FROM invoices WHERE id = 'INV-1001'") == [
        ("paid",)
    ]
    [(status, ref)] = crashkit.query(db_url, "SELECT status, gateway_ref FROM payments")
    assert status == "succeeded" and ref.startswith("fg_charge_")
    outputs = [
        e["output"] for e in out.transcript if e.get("name") == "pay_invoice" and "output" in e
    ]
    assert outputs and outputs[-1].startswith("Done: I paid $358.40")
    pays = [t for t in rows_of(db_url, "bea") if t.tool == "pay_invoice"]
    assert [t.status for t in pays] == ["failed", "succeeded"]
    assert pays[0].error == "interrupted by restart" and pays[0].delivered_at is not None
    assert pays[1].idempotency_key.split("#")[0] == pays[0].idempotency_key.split("#")[0] == key
    assert_nothing_left_running(db_url)


def test_call_killed_during_a_search_is_closed_and_the_caller_told(db_url, tmp_path):
    out = crashtrials.search_killed(db_url, tmp_path)
    assert out.details["failures"] == []
    assert (out.kills, out.rows, out.lost, out.doubled) == (1, 1, 0, 0)
    [row] = [t for t in rows_of(db_url, "cy") if t.tool == "lookup"]
    assert row.status == "failed" and row.error == "interrupted by restart"
    pid = out.details["pid"]
    assert any(n.startswith(f"interrupted by restart (call:{pid}:") for n in notes(db_url, row.id))
    assert any(e["type"] == "followup" and e["task_id"] == row.id for e in out.transcript)
    assert_nothing_left_running(db_url)


def test_file_gateway_is_idempotent_across_instances(tmp_path: Path):
    first = asyncio.run(crashkit.FileGateway(tmp_path / "g").charge(None, Decimal("1"), "k"))
    again = crashkit.FileGateway(tmp_path / "g")  # a restarted process
    assert asyncio.run(again.charge(None, Decimal("1"), "k")) == first
    assert asyncio.run(again.find("k")) == first and asyncio.run(again.find("x")) is None
    assert [e["op"] for e in again.entries()] == ["charge", "charge-repeat", "find", "find"]
