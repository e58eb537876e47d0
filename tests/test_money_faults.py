"""Issue 23, items 1 and 2 as fault trials (``make faults``): real processes whose clocks are
stepped with libfaketime, and a private Postgres killed while money moves.

- A call process's clock steps +1 h between a $100 payment and its retry: charged once.
- A second call process an hour off retries the same payment: charged once (Postgres).
- The store dies right after the gateway charged: the caller hears "being confirmed", and once
  the store is back the runner's reconciler records the payment (ledger, balance, invoice) and
  the caller hears the outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import crashkit
import faultkit
import pgfault
import pytest
from jobkit import running
from livekit.agents import llm
from moneykit import Gateway, billing_registry, hear_followups

from frontdesk.agents.patterns import run_tool
from frontdesk.agents.runtime import CallRuntime
from frontdesk.core import Database
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.db.store import wait_for
from frontdesk.plugins.billing import ledger
from frontdesk.plugins.billing.reconcile import pending_payments

pytestmark = pytest.mark.faults

HERE = Path(__file__).resolve().parent
HOUR = 3600.0


def _faketime(env: dict[str, str], **fake: str) -> dict[str, str]:
    return {**env, **faultkit.faketime(**fake)}


def _clockpay(url: str, caller: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "clockpay.py"), url, caller, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _answers(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _charges(log: Path) -> list[dict]:
    return [e for e in crashkit.FileGateway(log).entries() if e["op"] == "charge"]


@pytest.mark.backends("sqlite", "postgres")
async def test_a_clock_step_between_a_payment_and_its_retry_charges_once(db_url, tmp_path):
    log, stamp = tmp_path / "gateway.jsonl", tmp_path / "faketime"
    ready, go = tmp_path / "ready", tmp_path / "go"
    stamp.write_text("+0\n")
    fake = {"FAKETIME_TIMESTAMP_FILE": str(stamp), "FAKETIME_NO_CACHE": "1"}
    if db_url.startswith("sqlite"):
        # SQLite's clock is this process's: a real wall-clock step leaves the monotonic clock
        # alone. On Postgres every clock of the process is stepped, the harshest case.
        fake["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    env = _faketime({**crashkit.BASE_ENV, crashkit.GATEWAY_LOG: str(log)}, **fake)
    proc = _clockpay(db_url, "cleo", env, str(ready), str(go))
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    stamp.write_text("+1h\n")  # the call process's clock jumps an hour ahead
    go.write_text("go")
    result = _answers(proc)
    assert result["now"] - time.time() > HOUR - 120, "the clock step did not take"
    first, retry = result["answers"]
    assert first.startswith("Done: I paid $100.00"), first
    assert retry == first  # replayed: the same answer, the same payment reference
    charges = _charges(log)
    assert len(charges) == 1, charges  # 0 double charges


@pytest.mark.backends("postgres")
@pytest.mark.parametrize("offset", ["+1h", "-1h"])
async def test_a_retry_from_a_call_process_an_hour_off_charges_once(db_url, tmp_path, offset):
    log = tmp_path / "gateway.jsonl"
    env = {**crashkit.BASE_ENV, crashkit.GATEWAY_LOG: str(log)}
    first = _answers(_clockpay(db_url, "dora", env))["answers"][0]
    assert first.startswith("Done: I paid $100.00"), first
    skewed = _answers(_clockpay(db_url, "dora", _faketime(env, FAKETIME=offset)))["answers"][0]
    assert skewed == first  # the same call again, by the database's clock
    assert len(_charges(log)) == 1


@pytest.fixture
def private_pg():
    with pgfault.private_postgres() as pg:
        yield pg


@pytest.mark.parametrize("charged", [True, False], ids=["charged", "not-charged"])
async def test_a_payment_whose_store_died_is_settled_once_it_is_back(
    private_pg, tmp_path, monkeypatch, charged
):
    """Postgres is killed (``pg_ctl stop -m immediate``) while the gateway is being asked;
    the gateway charged, or lost the request. The caller hears "being confirmed"; once
    Postgres is back a runner's reconciler records the payment or releases the reservation,
    balance and invoice agree, and the caller hears how it ended."""
    settings = Settings(database_url=private_pg.url)
    gw = Gateway()
    registry = billing_registry(settings, gw, monkeypatch)
    store = await open_store(private_pg.url, registry)
    try:
        runtime = CallRuntime(None, store=store, registry=registry, settings=settings, caller="eve")  # type: ignore[arg-type]
        await run_tool(registry.tools["account_balance"], runtime, "billing", {}, None)

        async def store_dies() -> None:
            await asyncio.to_thread(private_pg.kill)
            if not charged:
                raise ConnectionError("the request never reached the gateway")

        if charged:
            gw.after = store_dies  # the money has moved; the ledger write is next
        else:
            gw.before = store_dies
        args = {"invoice_id": "INV-1001", "amount": "358.40", "confirmed": True}
        started = time.monotonic()
        with pytest.raises(llm.ToolError) as heard:
            await run_tool(registry.tools["pay_invoice"], runtime, "billing", args, None)
        told_in = time.monotonic() - started
        said = str(heard.value)
        assert "being confirmed" in said and "nothing will be charged twice" in said
        gw.before = gw.after = None
        await asyncio.to_thread(private_pg.start)
        back = time.monotonic()
        db = Database(store)
        # The call's own end-of-task write lands once the store is back.
        assert await wait_for(store, lambda: _closed(store, "eve"), timeout=60)
        async with running(store, registry, settings):  # reconciles at its start
            assert await wait_for(store, lambda: _none_pending(db), timeout=60)
        settled_in = time.monotonic() - back
        account = await ledger.get_account(db, "eve")
        [payment] = await ledger.payments(db, account.id)
        inv = await ledger.find_invoice(db, account.id, "INV-1001")
        heard_later = await hear_followups(store, "eve")
        if charged:
            assert (payment.status, payment.gateway_ref) == ("succeeded", "gw_charge_1")
            assert (inv.status, account.balance) == ("paid", Decimal("166.75"))
            assert "went through" in heard_later[0][1] and payment.id in heard_later[0][1]
        else:
            assert payment.status == "failed" and gw.moves == []
            assert (inv.status, inv.open_amount, account.balance) == (
                "open", Decimal("358.40"), Decimal("525.15"),
            )  # fmt: skip
            assert "did not go through" in heard_later[0][1]
        assert gw.double_charges() == 0
        _figures(tmp_path, charged=charged, told_in=told_in, settled_in=settled_in)
    finally:
        await store.close()


async def _closed(store, caller: str) -> bool:
    rows = await store.list(caller=caller, tool="pay_invoice")
    return bool(rows) and all(t.status != "running" for t in rows)


async def _none_pending(db: Database) -> bool:
    return not await pending_payments(db, 0)


def _figures(tmp_path: Path, **values: float) -> None:
    """Measured times, for docs/reliability.md (printed with -s; FRONTDESK_FIGURES appends)."""
    line = json.dumps({k: round(v, 2) for k, v in values.items()})
    print("figures:", line)
    if path := os.environ.get("FRONTDESK_FIGURES"):
        with open(path, "a") as f:
            f.write(line + "\n")
