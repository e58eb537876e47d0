"""Lease recovery in-process, on SQLite and Postgres: what ``Runner.recover`` does with each
kind of row a dead process leaves ``running``, and how a critical retry closes its own.

The crash tests (test_crash.py) kill real processes; these pin down each rule quickly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import kit
import pytest

from frontdesk.agents.patterns import _digest
from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.core.runner import RESTART, Runner
from frontdesk.core.schema import open_store
from frontdesk.db.models import utcnow
from frontdesk.db.store import TaskStore

pytestmark = pytest.mark.backends("sqlite", "postgres")

DEAD = "runner:elsewhere:4242:dead00"


async def left_running(store: TaskStore, pattern: str = "background", **kw) -> int:
    """A row whose holder died: running, its lease already past."""
    kw.setdefault("tool", "experiment")
    if pattern == "background":
        task = await store.create(caller="ada", pattern=pattern, args={"name": "x"}, **kw)
        await store.claim(DEAD, 30)
        await store.renew(DEAD, -1, [task.id])
    else:
        task = await store.create(
            caller="ada",
            pattern=pattern,
            status="running",
            lease_owner=DEAD,
            lease_seconds=-1,
            **kw,
        )
    return task.id


async def test_resumable_job_is_requeued_then_failed_at_the_attempt_limit(
    store, registry, settings
):
    runner = Runner(store, registry, settings)
    task_id = await left_running(store)
    [done] = await runner.recover()
    assert done.id == task_id and done.status == "queued" and done.lease_owner is None
    for attempt in range(2, settings.job_max_attempts + 1):
        claimed = await store.claim(DEAD, 30)
        assert claimed.id == task_id and claimed.attempts == attempt
        await store.renew(DEAD, -1, [task_id])
        [done] = await runner.recover()
    assert done.status == "failed" and done.error == RESTART
    assert done.delivered_at is None  # so the caller is told at their next chance
    assert [t.id for t in await store.pending_followups(["ada"])] == [task_id]
    notes = [e["note"] or "" for e in await store.events(task_id)]
    assert notes[-1] == f"{RESTART} ({DEAD}; attempt 3 of 3)"
    assert sum(n.startswith("lease expired") for n in notes) == 2


async def test_non_resumable_job_and_in_turn_rows_are_failed(store, registry, settings):
    spec = registry.tools["experiment"]
    registry.tools["once"] = dataclasses.replace(spec, name="once", resumable=False)
    job = await left_running(store, tool="once")
    search = await left_running(store, pattern="interruptible", tool="lookup")
    note = await left_running(store, pattern="fire_and_forget", tool="note")
    done = {t.id: t for t in await Runner(store, registry, settings).recover()}
    assert set(done) == {job, search, note}
    assert all(t.status == "failed" and t.error == RESTART for t in done.values())
    assert (await store.events(job))[-1]["note"] == f"{RESTART} ({DEAD}; not resumable)"
    assert {t.id for t in await store.pending_followups(["ada"])} == {job, search, note}
    assert await store.expired() == []


async def test_critical_row_reconciled_through_its_key(store, registry, settings):
    """A retry of the same logical call already succeeded: the dead row is closed as told."""
    dead = await left_running(store, pattern="critical", tool="charge", idempotency_key="abc.1")
    twin = await store.create(
        caller="ada", tool="charge", pattern="critical", status="running", idempotency_key="abc.1#2"
    )
    await store.transition(twin.id, "succeeded", result="Charged.", delivered_at=utcnow())
    alone = await left_running(store, pattern="critical", tool="charge", idempotency_key="zzz.1")
    done = {t.id: t for t in await Runner(store, registry, settings).recover()}
    assert done[dead].status == "failed" and done[dead].delivered_at is not None
    assert f"completed as task {twin.id}" in (await store.events(dead))[-1]["note"]
    assert done[alone].status == "failed" and done[alone].delivered_at is None
    assert [t.id for t in await store.pending_followups(["ada"])] == [alone]


async def test_a_holder_that_renews_after_the_scan_keeps_its_job(store, registry, settings):
    task_id = await left_running(store)
    [stale] = await store.expired()
    assert await store.renew(DEAD, 30, [task_id]) == {task_id}  # it was only slow
    assert await Runner(store, registry, settings)._reclaim(stale) is None
    task = await store.get(task_id)
    assert task.status == "running" and task.lease_owner == DEAD


async def test_runners_racing_to_recover_requeue_once(store, registry, settings, db_url):
    task_id = await left_running(store)
    others = [await open_store(db_url) for _ in range(3)]
    try:
        runners = [Runner(s, registry, settings) for s in (store, *others)]
        results = await asyncio.gather(*(r.recover() for r in runners))
    finally:
        for s in others:
            await s.close()
    assert sum(len(r) for r in results) == 1
    notes = [e["note"] or "" for e in await store.events(task_id)]
    assert sum(n.startswith("lease expired") for n in notes) == 1


@pytest.mark.backends("sqlite")
async def test_critical_retry_closes_a_dead_calls_row_and_runs_once(
    store, registry, settings, transcript
):
    """The caller retries a payment whose call process died mid-way: the expired row is
    closed (and counted as told), and the retry runs under the same stable key."""
    args = {"amount": "5.00", "seconds": 0.0}
    base = f"{_digest('ada', 'charge', args)}.1700000000"
    dead = await store.create(
        caller="ada", tool="charge", pattern="critical", status="running", args=args,
        idempotency_key=base, lease_owner="call:4242:gone", lease_seconds=-1,
    )  # fmt: skip
    scenario = parse_scenario(
        {
            "caller": "ada",
            "steps": [
                {"user": "lab", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]},
                {"user": "charge 5", "llm": [{"tools": [{"charge": args}]}, {"say": "Done."}]},
                {"expect": {"task": "charge", "status": "succeeded"}},
            ],
        }
    )
    assert await simulate([scenario], settings, registry, transcript.append, runner=False) == []
    rows = sorted(await store.list(caller="ada", tool="charge"), key=lambda t: t.id)
    assert [t.status for t in rows] == ["failed", "succeeded"]
    assert rows[0].id == dead.id and rows[0].error == RESTART and rows[0].delivered_at
    # the retry runs under the same logical key (a gateway would recognise it), on a new row
    assert rows[1].idempotency_key.startswith(f"{base}#") and kit.calls["charge"] == 1
    assert rows[1].idempotency_key != rows[0].idempotency_key
    output = [e for e in transcript.of("tool_output") if e["name"] == "charge"][-1]["output"]
    assert output == f"Charged 5.00 with key {base[:8]}."  # the stable key reached the tool


@pytest.mark.backends("sqlite")
async def test_critical_retry_while_the_first_is_alive_elsewhere_is_refused(
    store, registry, settings, transcript
):
    args = {"amount": "7.00", "seconds": 0.0}
    await store.create(
        caller="ada", tool="charge", pattern="critical", status="running", args=args,
        idempotency_key=f"{_digest('ada', 'charge', args)}.1700000000",
        lease_owner="call:4242:alive", lease_seconds=60,
    )  # fmt: skip
    scenario = parse_scenario(
        {
            "caller": "ada",
            "steps": [
                {"user": "lab", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]},
                {"user": "charge 7", "llm": [{"tools": [{"charge": args}]}, {"say": "Hm."}]},
            ],
        }
    )
    assert await simulate([scenario], settings, registry, transcript.append, runner=False) == []
    output = [e for e in transcript.of("tool_output") if e["name"] == "charge"][-1]
    assert output["is_error"] and "still being processed" in output["output"]
    assert kit.calls.get("charge", 0) == 0


async def test_runner_stop_gives_back_only_its_own_leases_within_a_bound(
    store, registry, settings, monkeypatch, caplog
):
    """stop() cancels jobs and releases their leases; a job that ignores cancellation gets a
    bounded grace, then is released anyway. Another runner's job is never touched."""
    from frontdesk.core import runner as runner_mod
    from frontdesk.core.tools import tool

    @tool(pattern="background")
    async def stubborn(ctx, seconds: float = 30) -> str:
        """Ignores one cancellation."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            await asyncio.sleep(seconds)
        return "done"

    registry.tools["stubborn"] = stubborn
    monkeypatch.setattr(runner_mod, "STOP_GRACE_SECONDS", 0.3)
    mine = await store.create(caller="ada", tool="stubborn", pattern="background", args={})
    runner = Runner(store, registry, settings, owner="runner:test:1:mine")
    claimed = await store.claim(runner.owner, 30)
    assert claimed.id == mine.id
    runner.jobs[mine.id] = asyncio.create_task(runner._run_job(claimed))
    theirs = await store.create(caller="bo", tool="experiment", pattern="background", args={})
    await store.claim("runner:test:2:theirs", 30)
    await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with caplog.at_level(logging.INFO):
        await runner.stop()
    assert loop.time() - started < 2
    released = await store.get(mine.id)
    assert released.status == "queued" and released.lease_owner is None
    assert (await store.events(mine.id))[-1]["note"] == f"released by {runner.owner} at shutdown"
    assert (await store.get(theirs.id)).lease_owner == "runner:test:2:theirs"


@pytest.mark.backends("sqlite")
async def test_hangup_records_critical_work_that_finished_while_the_turn_was_still_busy(
    store, registry, settings, monkeypatch
):
    """Shutdown waits for critical work; if it finished but its turn has not yet written the
    outcome (here a filler still stopping), shutdown records the real outcome, never
    "unfinished at hang-up" for a payment that went through."""
    import contextlib

    from frontdesk.agents.runtime import CallRuntime
    from frontdesk.agents import patterns

    @contextlib.asynccontextmanager
    async def slow_filler(*_args):
        yield
        await asyncio.sleep(0.3)  # stopping the filler speech takes a moment

    monkeypatch.setattr(patterns, "_ack", slow_filler)
    runtime = CallRuntime(None, store=store, registry=registry, settings=settings, caller="ada")
    turn = asyncio.create_task(
        patterns.run_tool(
            registry.tools["charge"], runtime, "lab", {"amount": "5.00", "seconds": 0.2}, None
        )
    )
    while not runtime.inflight:
        await asyncio.sleep(0.01)
    await runtime.shutdown("hang-up")
    assert (await turn).startswith("Charged 5.00")
    [row] = await store.list(caller="ada", tool="charge")
    assert row.status == "succeeded" and row.error is None
    assert [e["status"] for e in await store.events(row.id)] == ["running", "succeeded"]
