"""Crash trials: kill a real frontdesk process at one point, bring the system back the way an
operator would, and count what the store says about it.

Each trial returns an ``Outcome``: kills made, rows checked, rows lost (work that neither
finished nor was closed with the caller told) and rows doubled (a job's result recorded twice,
a payment key charged or written twice). tests/test_crash.py runs each once and also checks
the details; bench/reliability.py runs them many times at random kill points and reports the
sums (docs/reliability.md).

Every trial ends by checking the crash tests' invariant: no row ``running`` with an expired
lease (counted as lost).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import crashkit

from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings

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
BALANCE_AFTER = Decimal("166.75")  # 525.15 of sample invoices, less INV-1001's 358.40


@dataclass
class Outcome:
    kind: str
    kills: int = 0
    rows: int = 0
    lost: int = 0
    doubled: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    transcript: list[dict[str, Any]] = field(default_factory=list)


def settings_for(url: str, tmp: Path) -> Settings:
    """What a restarted worker runs with (the test suite's timings)."""
    os.environ["FRONTDESK_REPORTS_PATH"] = str(tmp / "reports")  # the reports plugin's own setting
    return Settings(
        database_url=url, load_plugins="",
        job_lease_seconds=3, followup_poll_seconds=0.05, runner_poll_seconds=0.05,
        ack_after_seconds=0.5, fire_and_forget_grace_seconds=2, runner_takeover_seconds=3,
    )  # fmt: skip


def call_back(
    settings: Settings, calls: dict[str, list[dict[str, Any]]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """Each caller's next call, concurrently, in this process with an embedded runner (a
    restarted worker). Returns (failed expectations, transcript)."""
    events: list[dict[str, Any]] = []
    # The restarted worker seeds a new caller's invoices as the killed one would have: a kill
    # that lands before the caller's account existed must not leave the callback without them.
    seed = "FRONTDESK_BILLING_SEED_INVOICES"
    os.environ.setdefault(seed, crashkit.BASE_ENV[seed])
    scenarios = [parse_scenario({"caller": c, "steps": steps}) for c, steps in calls.items()]
    registry = crashkit.load_registry(settings)
    failures = asyncio.run(simulate(scenarios, settings, registry, events.append))
    return failures, events


def _left_running(url: str) -> int:
    # Anything a dead process left running must be closed or re-run by now.
    return len(crashkit.query(url, "SELECT id FROM tasks WHERE status = 'running'"))


def _queue(url: str, jobs: list[tuple[str, dict[str, Any]]], tool: str = "experiment") -> list[int]:
    """Exactly what a call's background tool writes: the row, then the enqueue."""
    from frontdesk.core.jobs import JobClient

    async def run() -> list[int]:
        store = await open_store(url)
        client = JobClient(Settings(database_url=url))
        try:
            ids = []
            for caller, args in jobs:
                row = await store.create(
                    caller=caller, tool=tool, pattern="background", department="lab",
                    plugin="kit", args=args, note="queued for the runner",
                )  # fmt: skip
                await client.enqueue(row.id)
                ids.append(row.id)
            return ids
        finally:
            await client.aclose()
            await store.close()

    return asyncio.run(run())


# -- 1. a runner killed during background jobs ------------------------------------------------


def runner_killed_mid_job(
    url: str, tmp: Path, *, jobs: int = 1, seconds: float = 2.0, kill_at: float = 0.5
) -> Outcome:
    """Queue ``jobs`` background jobs, start ``frontdesk runner``, SIGKILL it once a job is
    ``kill_at`` done; the callers reconnect to a restarted worker and must hear every result."""
    started = time.monotonic()
    out = Outcome("runner killed mid-job")
    callers = [f"job{n}" for n in range(jobs)]
    ids = _queue(url, [(c, {"name": f"crash-{c}", "seconds": seconds}) for c in callers])
    runner = crashkit.start("runner", "--db", url)
    try:
        crashkit.wait_until(
            lambda: crashkit.query(url, "SELECT 1 FROM tasks WHERE progress >= ?", kill_at),
            timeout=30,
            proc=runner,
        )
    finally:
        out.kills = int(crashkit.kill(runner))
    out.details["pid"] = runner.pid
    out.details["running_at_kill"] = len(
        crashkit.query(url, "SELECT id FROM tasks WHERE status = 'running'")
    )
    steps = [
        {"wait": {"task": "experiment", "status": "succeeded", "timeout": 40}},
        {"wait": {"seconds": 0.5}},
        {"expect": {"task": "experiment", "delivered": True}},
    ]
    failures, out.transcript = call_back(settings_for(url, tmp), {c: steps for c in callers})
    out.details["failures"] = failures
    rows = {
        r[0]: r
        for r in crashkit.query(
            url, "SELECT id, status, attempts, delivered_at FROM tasks WHERE tool = 'experiment'"
        )
    }
    finishes = Counter(
        task_id
        for (task_id,) in crashkit.query(
            url, "SELECT task_id FROM task_events WHERE status = 'succeeded' AND note IS NULL"
        )
    )
    told = Counter(
        e["task_id"] for e in out.transcript if e["type"] == "followup"
    )  # spoken follow-ups
    out.rows = len(ids)
    out.lost = sum(
        1 for i in ids if i not in rows or rows[i][1] != "succeeded" or rows[i][3] is None
    )
    out.doubled = sum(max(0, finishes[i] - 1) + max(0, told[i] - 1) for i in ids)
    out.details["attempts"] = sorted(rows[i][2] for i in ids if i in rows)
    out.lost += _left_running(url)
    out.seconds = time.monotonic() - started
    return out


# -- 2. a payment killed between the gateway charge and the ledger write -----------------------


def payment_killed(
    url: str, tmp: Path, *, after_charge: bool = True, delay: float = 0.0
) -> Outcome:
    """A billing call pays INV-1001 and is SIGKILLed: right after the gateway moved the money
    (``after_charge``), or ``delay`` seconds after the call reached the billing desk. The caller calls
    back once the dead call's lease has run out and asks again. Exactly one charge per key."""
    started = time.monotonic()
    out = Outcome("payment killed" + (" after the charge" if after_charge else " at random"))
    gateway_log, charged = tmp / "gateway.jsonl", tmp / "charged"
    scenario = crashkit.write_scenario(tmp / "pay.yaml", "bea", [TO_BILLING, PAY_TURN])
    env = {crashkit.GATEWAY_LOG: str(gateway_log)}
    if after_charge:
        env[crashkit.CRASH_AFTER_CHARGE] = str(charged)
    else:
        env[crashkit.GATEWAY_DELAY] = "0.1"
    call = crashkit.start("simulate", str(scenario), "--json", "--db", url, **env)
    try:
        if after_charge:
            crashkit.wait_until(charged.exists, timeout=40, proc=call)
        else:
            # From the moment the call reaches billing: the kill may land before the task row,
            # before the payment row, between charge and ledger write, or after it.
            crashkit.wait_until(
                lambda: crashkit.query(url, "SELECT 1 FROM calls WHERE handoffs LIKE '%billing%'"),
                timeout=40,
                proc=call,
            )
            time.sleep(delay)
    finally:
        out.kills = int(crashkit.kill(call))
    before = crashkit.query(url, "SELECT status FROM payments")
    out.details["payment_at_kill"] = before[0][0] if before else None
    task = crashkit.query(url, "SELECT status FROM tasks WHERE tool = 'pay_invoice'")
    out.details["task_at_kill"] = task[0][0] if task else None
    # The caller calls back once the dead call's lease has run out.
    crashkit.wait_until(
        lambda: len(crashkit.running_with_expired_lease(url)) == _left_running(url), timeout=10
    )
    os.environ[crashkit.GATEWAY_LOG] = str(gateway_log)
    try:
        failures, out.transcript = call_back(
            settings_for(url, tmp),
            {
                "bea": [
                    TO_BILLING,
                    PAY_TURN,
                    {"expect": {"task": "pay_invoice", "status": "succeeded"}},
                ]
            },
        )
    finally:
        os.environ.pop(crashkit.GATEWAY_LOG, None)
    out.details["failures"] = failures
    payments = crashkit.query(url, "SELECT idempotency_key, status FROM payments")
    keys = Counter(k for k, _ in payments)
    charges = Counter(
        e["key"] for e in crashkit.FileGateway(gateway_log).entries() if e["op"] == "charge"
    )
    [(balance,)] = crashkit.query(url, "SELECT balance FROM accounts WHERE caller = 'bea'")
    balance = Decimal(str(balance)).quantize(Decimal("0.01"))
    out.rows = len(keys) or 1
    out.doubled = sum(n - 1 for n in keys.values()) + sum(n - 1 for n in charges.values())
    out.doubled += int(balance < BALANCE_AFTER)
    paid = [k for k, status in payments if status == "succeeded"]
    out.lost = int(len(paid) != 1 or balance > BALANCE_AFTER or set(charges) != set(paid))
    out.lost += _left_running(url)
    out.details.update(
        key=payments[0][0] if payments else None, charges=dict(charges), balance=str(balance),
        ops=[e["op"] for e in crashkit.FileGateway(gateway_log).entries()],
    )  # fmt: skip
    out.seconds = time.monotonic() - started
    return out


# -- 3. a call killed during an interruptible search -------------------------------------------


def search_killed(url: str, tmp: Path) -> Outcome:
    """A call is SIGKILLed while its search runs; a restarted worker's runner closes the row as
    failed "interrupted by restart" once its lease expires, and the caller is told when they
    call back."""
    started = time.monotonic()
    out = Outcome("call killed mid-search")
    scenario = crashkit.write_scenario(
        tmp / "search.yaml",
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
                url, "SELECT 1 FROM tasks WHERE tool = 'lookup' AND status = 'running'"
            ),
            timeout=40,
            proc=call,
        )
    finally:
        out.kills = int(crashkit.kill(call))
    out.details["pid"] = call.pid
    failures, out.transcript = call_back(
        settings_for(url, tmp),
        {
            "cy": [
                {"wait": {"task": "lookup", "status": "failed", "timeout": 20}},
                {"wait": {"seconds": 0.5}},
                {"expect": {"task": "lookup", "delivered": True}},
                {"expect": {"said": "did not complete"}},
            ]
        },
    )
    out.details["failures"] = failures
    rows = crashkit.query(
        url, "SELECT id, status, error, delivered_at FROM tasks WHERE tool = 'lookup'"
    )
    out.rows = len(rows)
    out.lost = sum(
        1 for _, s, e, d in rows if s != "failed" or e != "interrupted by restart" or not d
    )
    out.lost += _left_running(url)
    told = Counter(e["task_id"] for e in out.transcript if e["type"] == "followup")
    out.doubled = sum(max(0, n - 1) for n in told.values())
    out.seconds = time.monotonic() - started
    return out


# -- 4. two processes on one SQLite file --------------------------------------------------------

TOOLS_PER_CALL = ("lookup", "note", "experiment")  # interruptible, fire-and-forget, background


def _many_calls(caller: str) -> dict[str, Any]:
    return {
        "caller": caller,
        "steps": [
            {
                "user": "the lab, and do it all",
                "llm": [
                    {"tools": [{"transfer_to_lab": {}}]},
                    {
                        "tools": [
                            {"lookup": {"query": "argon"}},
                            {"note": {"text": "hi", "seconds": 0.05}},
                            {"experiment": {"name": "x", "seconds": 0.05}},
                        ]
                    },
                    {"say": "On it."},
                ],
            },
            {"wait": {"task": "experiment", "status": "succeeded", "timeout": 90}},
        ],
    }


def _resumed_after_stop(starts: list[tuple[int, str]]) -> set[int]:
    """Jobs started by a second runner after the first stopped (a simulate process ends its
    runner when its own calls are done; the other runner resumes what it was running)."""
    by: dict[int, list[str]] = {}
    for task_id, note in starts:
        by.setdefault(task_id, []).append(note)
    return {i for i, notes in by.items() if len(notes) == 2 and notes[0] != notes[1]}


def two_processes(url: str, tmp: Path, *, calls: int = 100) -> Outcome:
    """Two ``frontdesk simulate --callers N`` processes (each with its embedded runner) on one
    database. Every call's three rows must be there once, finished."""
    started = time.monotonic()
    out = Outcome(f"two processes x {calls} calls")
    procs = []
    for name in ("p1", "p2"):
        path = crashkit.write_scenario(tmp / f"{name}.yaml", **_many_calls(name))
        procs.append(
            # The production bound: 100 calls on one loop can hold a heartbeat for seconds.
            crashkit.start(
                "simulate",
                str(path),
                "--json",
                "--callers",
                str(calls),
                "--db",
                url,
                lease=30,
                takeover=30,
            )  # fmt: skip
        )
    outputs = [crashkit.finish(p, timeout=300) for p in procs]
    out.details["returncodes"] = [p.returncode for p in procs]
    out.details["stderr"] = [err[-2000:] for _, err in outputs]
    out.details["lock_errors"] = sum(err.lower().count("database is locked") for _, err in outputs)
    kinds: Counter[str] = Counter()
    for text, _ in outputs:
        kinds.update(json.loads(line)["type"] for line in text.splitlines() if line.strip())
    out.details["events"] = dict(kinds)
    expected = Counter(
        (f"{p}-{i}", t) for p in ("p1", "p2") for i in range(1, calls + 1) for t in TOOLS_PER_CALL
    )
    rows = crashkit.query(url, "SELECT id, caller, tool, status, attempts FROM tasks")
    seen = Counter((c, t) for _, c, t, s, _ in rows if s == "succeeded")
    out.rows = sum(expected.values())
    out.lost = sum(max(0, n - seen[k]) for k, n in expected.items())
    out.doubled = sum(
        max(0, n - expected[k]) for k, n in Counter((c, t) for _, c, t, _, _ in rows).items()
    )
    # A job runs again only after its runner stopped (the other resumes it); else it doubled.
    starts = crashkit.query(
        url, "SELECT task_id, note FROM task_events WHERE note LIKE 'started by runner %'"
    )
    out.doubled += sum(n - 1 for n in Counter(i for i, _ in starts).values() if n > 1) - sum(
        1 for i, *_ in rows if i in _resumed_after_stop(starts)
    )
    finishes = crashkit.query(
        url, "SELECT task_id FROM task_events WHERE status = 'succeeded' AND note IS NULL"
    )
    out.doubled += sum(n - 1 for n in Counter(i for (i,) in finishes).values())
    out.details["resumed"] = len(_resumed_after_stop(starts))
    out.details["runners"] = len({n.rsplit(" ", 1)[1] for _, n in starts})
    out.seconds = time.monotonic() - started
    return out


# -- 5. a durable 3-step job killed after one of its steps ------------------------------------

STEPS = ("gather", "write", "draw")


def steps_killed(url: str, tmp: Path, *, step: str) -> Outcome:
    """A 3-step job (kit's ``pipeline``) whose runner is SIGKILLed right after ``step`` was
    recorded; a new runner resumes it. Lost: the job did not succeed, or a step never ran.
    Doubled: any step's effect more than once, or the result written twice."""
    import kit

    started = time.monotonic()
    out = Outcome("3-step job killed after a step")
    log = tmp / "effects.jsonl"
    [job] = _queue(url, [("ada", {"name": "k"})], tool="pipeline")
    env = {kit.EFFECTS: str(log), kit.HANG_AFTER: step}
    runner = crashkit.start("runner", "--db", url, **env)
    try:
        crashkit.wait_until(
            lambda: any(e["effect"] == f"hung after {step}" for e in kit.effects(log)),
            timeout=60,
            proc=runner,
        )
    finally:
        out.kills = int(crashkit.kill(runner))
    again = crashkit.start("runner", "--db", url, **{kit.EFFECTS: str(log)})
    try:
        crashkit.wait_until(
            lambda: crashkit.query(url, "SELECT 1 FROM tasks WHERE id = ? AND status = ?", job,
                                   "succeeded"),
            timeout=60,
            proc=again,
        )  # fmt: skip
    except AssertionError:
        pass  # counted as lost below
    finally:
        crashkit.stop(again)
    counts = Counter(e["effect"] for e in kit.effects(log) if e["effect"] in STEPS)
    [(status,)] = crashkit.query(url, "SELECT status FROM tasks WHERE id = ?", job)
    finishes = crashkit.query(
        url, "SELECT 1 FROM task_events WHERE task_id = ? AND status = 'succeeded'", job
    )
    out.rows = 1
    out.lost = int(status != "succeeded" or set(counts) != set(STEPS)) + _left_running(url)
    out.doubled = sum(n - 1 for n in counts.values()) + max(0, len(finishes) - 1)
    out.details["step"] = step
    out.seconds = time.monotonic() - started
    return out
